/// An app's bundle identifier (`CFBundleIdentifier`), known to be well formed: Apple's
/// characters (`A-Z a-z 0-9 - .`), not starting or ending with a dot, no `..`, at most
/// ``maximumLength`` characters. It names the app's container folder, its log and its
/// reports, so nothing else may get through. The manifest reader checks identifiers by
/// this same rule (``problem(with:)``).
///
/// Coded as the plain string, so the control socket and stored JSON read as they did
/// when this was a `String`; decoding a string that breaks the rule throws a
/// `DecodingError` that says why.
public struct BundleID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The identifier as written.
    public let rawValue: String

    /// The longest bundle identifier: 155 characters, App Store Connect's limit (Xcode
    /// accepts longer ones; the store does not). It names the app's container, its log
    /// (`logs/<id>.log`) and its reports (`reports/<id>-<ms>-<pid>.json`, 185 bytes at
    /// most), all well within NAME_MAX (255).
    public static let maximumLength = 155

    /// Why a string is not a bundle identifier.
    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// Longer than ``BundleID/maximumLength`` (the count is the string's characters).
        case tooLong(characters: Int)
        /// Empty, a character outside `A-Z a-z 0-9 - .`, a leading or trailing dot, or `..`.
        case malformed

        /// What is wrong, for error messages.
        public var description: String {
            switch self {
            case .tooLong(let n): "\(n) characters long, over the limit of \(BundleID.maximumLength) (App Store Connect's)"
            case .malformed: "not in reverse-DNS form with only A-Z, a-z, 0-9, '-' and '.', e.g. com.example.App"
            }
        }
    }

    /// What is wrong with `string` as a bundle identifier; nil when it is well formed.
    /// The length is checked first (in bytes: only ASCII passes the second check). The
    /// check reads the UTF-8 bytes once: every string from outside the host (a frame, a
    /// database row, a file name) passes it, some on the paths of every transfer.
    public static func problem(with string: String) -> Problem? {
        let utf8 = string.utf8
        guard utf8.count <= maximumLength else { return .tooLong(characters: string.count) }
        guard !utf8.isEmpty else { return .malformed }
        // Starting as if after a dot catches a leading dot as "..".
        var previous = UInt8(ascii: ".")
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                break
            case UInt8(ascii: "."):
                if previous == UInt8(ascii: ".") { return .malformed }
            default:
                return .malformed
            }
            previous = byte
        }
        return previous == UInt8(ascii: ".") ? .malformed : nil
    }

    /// `string` as a bundle identifier, or the reason it is not one.
    public init(validating string: String) throws(Problem) {
        if let problem = Self.problem(with: string) { throw problem }
        rawValue = string
    }

    /// `string` as a bundle identifier; nil when it is not well formed.
    public init?(_ string: String) {
        guard Self.problem(with: string) == nil else { return nil }
        rawValue = string
    }

    /// Decodes the plain string, checked by the same rule.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        if let problem = Self.problem(with: string) {
            let shown = string.count > 80 ? String(string.prefix(80)) + "…" : string
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid bundle identifier \"\(shown)\": \(problem)")
        }
        rawValue = string
    }

    /// Encodes the plain string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// Orders as the strings do.
    public static func < (a: BundleID, b: BundleID) -> Bool { a.rawValue < b.rawValue }

    /// The identifier as written.
    public var description: String { rawValue }
}
