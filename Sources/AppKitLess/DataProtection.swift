import AppHostProtocol
import CAppHostStamp
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file's data-protection class, as `FileProtectionType`.
public typealias FileProtectionClass = AppHostProtocol.FileProtectionClass

extension Application {
    /// Whether files with complete protection can be read now
    /// (`UIApplication.isProtectedDataAvailable`): false while the device is locked
    /// (`apphost device lock`), from the end of the 10 s after the lock to the unlock. Asks the host each time and blocks until it answers;
    /// callable from any thread. A failure is logged to stderr and reads as false.
    public nonisolated var isProtectedDataAvailable: Bool {
        let request = ServiceRequest.protectedDataAvailability
        do throws(ServiceError) {
            let reply = try serviceRequest(request)
            guard case .protectedDataAvailable(let available) = reply else { throw ServiceRouter.unexpected(reply, to: request) }
            return available
        } catch {
            effects.log(ServiceRouter.failureLine(of: request.apiName, error))
            return false
        }
    }
}

extension Data.WritingOptions {
    /// The protection class these options ask for (nil: none named, iOS's default
    /// `completeUntilFirstUserAuthentication` applies).
    /// The protection options are values in one field (`NSDataWritingFileProtectionMask`,
    /// 0xf0000000), not separate bits: `.completeFileProtectionUnlessOpen` (0x3…)
    /// "contains" `.completeFileProtection` (0x2…), so they are compared whole.
    var protectionClass: FileProtectionClass? {
        switch Data.WritingOptions(rawValue: rawValue & 0xf000_0000) {
        case .completeFileProtection: .complete
        case .completeFileProtectionUnlessOpen: .completeUnlessOpen
        case .completeFileProtectionUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .noFileProtection: FileProtectionClass.none
        default: nil
        }
    }
}

extension Data {
    /// Writes the data as `write(to:options:)` does on iOS, with its data-protection
    /// options: `.completeFileProtection` (closed to the app while the device is locked),
    /// `.completeFileProtectionUnlessOpen` (the same, but it may be created while locked,
    /// and a descriptor the app holds stays usable),
    /// `.completeFileProtectionUntilFirstUserAuthentication` (closed only until the first
    /// unlock after the host starts; the default) or `.noFileProtection`. Foundation on
    /// Linux ignores those options; this records the class on the file (an extended
    /// attribute the host reads when the device locks). As on iOS, a file with complete
    /// protection cannot be written while the device is locked (after the 10 s after the
    /// lock, when ``Application/isProtectedDataAvailable`` reads false): that throws
    /// `CocoaError(.fileWriteNoPermission)` and writes nothing.
    public func writeProtected(to url: URL, options: Data.WritingOptions = []) throws {
        let protection = options.protectionClass
        if protection == .complete, !Application.shared.isProtectedDataAvailable {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: url.path,
                NSLocalizedDescriptionKey: "the device is locked: a file with complete protection cannot be written"])
        }
        let plain = Data.WritingOptions(rawValue: options.rawValue & ~0xf000_0000)
        try write(to: url, options: plain)
        guard let protection else { return }
        let value = protection.rawValue
        let code = aph_xattr_set(url.path, FileProtectionClass.attribute, value, value.utf8.count)
        guard code == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path,
                NSLocalizedDescriptionKey: "could not record the file's protection class: \(String(cString: strerror(code)))"])
        }
    }
}
