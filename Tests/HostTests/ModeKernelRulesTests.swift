import AppHostProtocol
import AppHostSystem
import Foundation
import TestSupport
import Testing
@testable import Host

#if canImport(Glibc)
import Glibc
#endif

/// Existing paths matching a device pattern (`/dev/ttyUSB*`).
func existingDevices(_ patterns: [String]) -> [String] {
    var found: [String] = []
    for pattern in patterns {
        var g = glob_t()
        defer { globfree(&g) }
        guard glob(pattern, 0, nil, &g) == 0 else { continue }
        for i in 0..<Int(g.gl_pathc) {
            if let p = g.gl_pathv[i] { found.append(String(cString: p)) }
        }
    }
    return found
}

let soundDevices = existingDevices(["/dev/snd/*", "/dev/dsp*"])
let serialDevices = existingDevices(["/dev/ttyUSB*", "/dev/ttyACM*"])

/// The kernel rules built from an app's declared modes, seen from inside a real app
/// process: the probe tries the socket or device and prints what the kernel said.
@Suite("Mode kernel rules", .tags(.process), .timeLimit(.minutes(2)), .enabled(if: probeBuilt, "sample apps not built: run `swift build` first (scripts/test.sh does)"))
struct ModeKernelRulesTests {
    /// Launches a probe declaring `modes` that runs `actions` in didFinishLaunching; returns its log.
    func probe(_ modes: [BackgroundMode], _ actions: [String]) async throws -> String {
        try await withHost(label: "kr") { host -> String in
            let id: BundleID = "com.kernel.\(modes.map(\.rawValue).joined(separator: "-").isEmpty ? "none" : modes.map(\.rawValue).joined(separator: "-"))"
            try await host.installProbe(id, extra: modes.isEmpty ? [:] : ["UIBackgroundModes": modes.map(\.rawValue)])
            _ = try await host.supervisor.launch(id, background: false, arguments: actions.flatMap { ["--on", "launch", $0] })
            return (try? String(contentsOfFile: host.dir.path + "/logs/\(id).log", encoding: .utf8)) ?? ""
        }
    }

    /// AF_BLUETOOTH: EPERM from the seccomp filter without a bluetooth mode; with one,
    /// the call reaches the kernel (EAFNOSUPPORT on a machine without a Bluetooth stack).
    @Test(arguments: [
        ([BackgroundMode](), false), ([.audio, .location], false), ([.externalAccessory], false),
        ([.bluetoothCentral], true), ([.bluetoothPeripheral], true),
    ])
    func bluetoothSocketsOnlyWithABluetoothMode(_ modes: [BackgroundMode], _ allowed: Bool) async throws {
        let log = try await probe(modes, ["socket:bluetooth", "socket:inet"])
        let line = log.split(separator: "\n").first { $0.contains("socket bluetooth:") }.map(String.init) ?? "(no line)\n\(log)"
        if allowed {
            #expect(!line.contains("EPERM"), "the filter must let it through: \(line)")
        } else {
            #expect(line.hasSuffix("EPERM"), "denied by seccomp: \(line)")
        }
        #expect(log.contains("[ProbeApp] socket inet: ok"), "other families are untouched")
    }

    @Test(.enabled(if: !soundDevices.isEmpty, "no sound device (/dev/snd/*, /dev/dsp*) on this machine; the Landlock device rule itself is shown with stand-in paths in AppHostSystemTests' ModeRulesTests"))
    func soundDevicesOnlyWithAudio() async throws {
        let device = try #require(soundDevices.first)
        let without = try await probe([], ["open:\(device)"])
        #expect(without.contains("open \(device): EACCES"))
        let with = try await probe([.audio], ["open:\(device)"])
        #expect(!with.contains("open \(device): EACCES"))
    }

    @Test(.enabled(if: !serialDevices.isEmpty, "no serial device (/dev/ttyUSB*, /dev/ttyACM*) on this machine; the Landlock device rule itself is shown with stand-in paths in AppHostSystemTests' ModeRulesTests"))
    func serialDevicesOnlyWithExternalAccessory() async throws {
        let device = try #require(serialDevices.first)
        let without = try await probe([], ["open:\(device)"])
        #expect(without.contains("open \(device): EACCES"))
        let with = try await probe([.externalAccessory], ["open:\(device)"])
        #expect(!with.contains("open \(device): EACCES"))
    }

    /// Whatever the devices, an app under the device rules still opens what it needs.
    @Test func theDeviceRulesLeaveOrdinaryFilesAlone() async throws {
        let log = try await probe([], ["open:/dev/null", "open:/dev/urandom"])
        #expect(log.contains("open /dev/null: ok"))
        #expect(log.contains("open /dev/urandom: ok"))
    }
}
