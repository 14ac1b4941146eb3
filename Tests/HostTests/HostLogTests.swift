import Foundation
@testable import Host
import Logging
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The host's own log: its file in the state directory is bounded (rotated, lines cut),
/// its lines carry milliseconds and, on a virtual clock, host time.
@Suite("host log")
struct HostLogTests {
    @Test func theFileIsRotatedAtItsBoundKeepingTheNewestOnes() throws {
        let dir = try TempDir("hostlog")
        defer { dir.remove() }
        let file = try HostLogFile(path: dir.path + "/host.log", maximumSize: 4096, kept: 2)
        let line = String(repeating: "x", count: 999)  // 1000 bytes with its newline
        for i in 0..<20 { file.write("\(i % 10)" + line.dropFirst()) }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(names == ["host.1.log", "host.2.log", "host.log"], "at most `kept` older files: \(names)")
        for name in names {
            let size = try FileManager.default.attributesOfItem(atPath: dir.path + "/" + name)[.size] as? Int ?? -1
            #expect(size <= 4096, "\(name) is \(size) bytes")
        }
        // The newest lines are in host.log, the one before in host.1.log.
        let current = try String(contentsOfFile: dir.path + "/host.log", encoding: .utf8)
        #expect(current.split(separator: "\n").last?.first == "9", "\(current.prefix(20))")
        var info = stat()
        #expect(stat(dir.path + "/host.log", &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test func aLineOverTheBoundIsCutAndSaysSo() throws {
        let dir = try TempDir("hostlog")
        defer { dir.remove() }
        let file = try HostLogFile(path: dir.path + "/host.log")
        file.write(String(repeating: "y", count: HostLogFile.maximumLineLength * 3))
        let text = try String(contentsOfFile: dir.path + "/host.log", encoding: .utf8)
        #expect(text.utf8.count < HostLogFile.maximumLineLength + 100)
        #expect(text.hasSuffix("(cut: \(HostLogFile.maximumLineLength * 3) bytes)\n"), "\(text.suffix(60))")
    }

    @Test func linesCarryMillisecondsAndHostTimeOnAVirtualClock() throws {
        let wall = Date(timeIntervalSince1970: 1_700_000_000.123)
        let plain = HostLogHandler.line(wall: wall, host: nil, level: .info, label: "apphost.daemon", metadata: [:],
                                        source: "Host", message: "hello")
        #expect(plain.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.123[+-]\d{4} info apphost\.daemon: \[Host\] hello$"#,
                            options: .regularExpression) != nil, "\(plain)")
        let clock = HostLogClock()
        #expect(clock.text() == nil)
        clock.set(start: Date(timeIntervalSince1970: 1_800_000_000), elapsed: .milliseconds(31_250))
        #expect(clock.text() == "+31.250s 2027-01-15T08:00:31.250Z")
        let virtual = HostLogHandler.line(wall: wall, host: clock.text(), level: .warning, label: "l", metadata: ["k": "v"],
                                          source: "S", message: "m")
        #expect(virtual.contains(".123") && virtual.contains(" (host +31.250s 2027-01-15T08:00:31.250Z) warning l: k=v [S] m"), "\(virtual)")
    }

    @Test func levelsAreReadByNameAndABadOneIsAClearError() throws {
        #expect(try Logger.Level.named("TRACE", setting: "APPHOST_LOG_LEVEL") == .trace)
        #expect(try Logger.Level.named("critical", setting: "APPHOST_LOG_LEVEL") == .critical)
        #expect(throws: HostLogError.self) { try Logger.Level.named("verbose", setting: "APPHOST_LOG_LEVEL") }
        do {
            _ = try Logger.Level.named("verbose", setting: "APPHOST_LOG_LEVEL")
        } catch {
            #expect(error.description == "APPHOST_LOG_LEVEL=\"verbose\" is not a log level: one of trace, debug, info, notice, warning, error, critical")
        }
    }
}
