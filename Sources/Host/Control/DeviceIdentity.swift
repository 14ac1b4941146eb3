import AppHostProtocol
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// The device a state directory stands for, as `xcrun simctl list devices` shows a
/// simulator: a UDID made once and kept in the state directory (`device.json`), and a
/// name. Scripts written for simctl name the device by either, or by `booted`.
public struct DeviceIdentity: Codable, Sendable, Equatable {
    /// An uppercase UUID, as simctl's UDIDs are.
    public var udid: String
    /// "AppHost <state directory's folder name>".
    public var name: String

    /// `device.json`.
    public static let fileName = "device.json"
    /// The file is ours and small; anything longer is not what we wrote.
    public static let maximumFileSize = 4096

    public init(udid: String, name: String) {
        self.udid = udid
        self.name = name
    }

    /// The file's path in `stateDirectory`.
    public static func path(stateDirectory: String) -> String {
        stateDirectory + "/" + fileName
    }

    /// The name a new state directory's device gets.
    public static func defaultName(stateDirectory: String) -> String {
        "AppHost " + (stateDirectory as NSString).lastPathComponent
    }

    /// The identity kept in `stateDirectory`; nil when none was made yet.
    public static func load(stateDirectory: String) throws(DeviceIdentityError) -> DeviceIdentity? {
        let path = path(stateDirectory: stateDirectory)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw DeviceIdentityError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: maximumFileSize + 1)
        var count = 0
        while count < buffer.count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            count += n
        }
        guard count <= maximumFileSize else {
            throw DeviceIdentityError(description: "\(path) is over \(maximumFileSize) bytes: not a device file AppHost wrote (delete it to make a new UDID)")
        }
        do {
            let identity = try JSONDecoder().decode(DeviceIdentity.self, from: Data(buffer[0..<count]))
            guard UUID(uuidString: identity.udid) != nil else {
                throw DeviceIdentityError(description: "\(path): \"udid\" is not a UUID (delete the file to make a new UDID)")
            }
            return identity
        } catch let error as DeviceIdentityError {
            throw error
        } catch {
            throw DeviceIdentityError(description: "\(path) is not a device file AppHost wrote (\(error)); delete it to make a new UDID")
        }
    }

    /// The identity kept in `stateDirectory` (which must exist), made now if there is
    /// none. Two processes making it at once agree: the file appears whole, by `link`,
    /// and the second takes the first's.
    public static func loadOrCreate(stateDirectory: String) throws(DeviceIdentityError) -> DeviceIdentity {
        if let identity = try load(stateDirectory: stateDirectory) { return identity }
        let identity = DeviceIdentity(udid: UUID().uuidString.uppercased(), name: defaultName(stateDirectory: stateDirectory))
        let path = path(stateDirectory: stateDirectory)
        // Unique per maker, threads of one process included (two tasks sharing a name
        // would unlink each other's file before its link).
        let temporary = path + ".\(getpid()).\(UUID().uuidString).tmp"
        let data: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            data = try encoder.encode(identity) + Data("\n".utf8)
        } catch {
            throw DeviceIdentityError(description: "cannot encode the device identity: \(error)")
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw DeviceIdentityError(description: "cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        defer { unlink(temporary) }
        guard written == data.count, synced else {
            throw DeviceIdentityError(description: "cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        if link(temporary, path) != 0 {
            let code = errno
            guard code == EEXIST, let theirs = try load(stateDirectory: stateDirectory) else {
                throw DeviceIdentityError(description: "cannot create \(path): \(String(cString: strerror(code)))")
            }
            return theirs
        }
        return identity
    }

    /// Whether `argument` (a UDID, in any case, or the name) names this device.
    public func isNamed(by argument: String) -> Bool {
        argument == name || argument.caseInsensitiveCompare(udid) == .orderedSame
    }
}

/// A device file that cannot be read or written.
public struct DeviceIdentityError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

extension HostConfiguration {
    /// An app's data container (its HOME: Documents, Library, tmp).
    public func dataContainer(of bundleIdentifier: BundleID) -> String {
        containersDirectory + "/" + bundleIdentifier.rawValue
    }

    /// The shared container of an App Group.
    public func groupContainer(_ groupIdentifier: String) -> String {
        groupsDirectory + "/" + groupIdentifier
    }
}

extension Store {
    /// The bundle identifiers installed on the state directory's database, read without a
    /// host (shell completion); empty when there is no database or it cannot be read. A row
    /// that names no bundle identifier (an older host's) is left out, as the host skips it.
    public static func installedBundleIdentifiers(stateDirectory: String) -> [BundleID] {
        let path = HostConfiguration(stateDirectory: stateDirectory).databasePath
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(1)
        guard let queue = try? DatabaseQueue(path: path, configuration: config) else { return [] }
        return (try? queue.read { db in
            try String.fetchAll(db, sql: "SELECT bundleIdentifier FROM app ORDER BY bundleIdentifier LIMIT 10000")
        }).map { $0.compactMap(BundleID.init) } ?? []
    }
}
