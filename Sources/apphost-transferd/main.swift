// apphost-transferd: the shared background-transfer daemon (iOS's background
// URLSession). Talks to the host over descriptor 3 (APPHOST_TRANSFERD_FD):
// TransferRequest frames in, TransferEvent frames out. Exits 0 at EOF.
import AppHostProtocol
import Foundation
import TransferCore
import NIOCore
import NIOPosix

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("apphost-transferd: \(message)\nusage: apphost-transferd --state-dir DIR [--containers DIR] [--extra-ca FILE] [--retry-base SECONDS] [--max-attempts N] [--per-host N] [--max-concurrent N] [--max-finishing N] [--read-timeout SECONDS] [--commit-bytes N] [--event-loops N] [--power plugged|battery] [--network wifi|cellular|none]\n".utf8))
    exit(64)
}

var stateDir: String?
var options: [(String, String)] = []
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    guard a.hasPrefix("--") else { usage("unexpected argument \(a)") }
    guard let v = args.popFirst() else { usage("\(a) needs a value") }
    if a == "--state-dir" { stateDir = v } else { options.append((a, v)) }
}
guard let stateDir else { usage("--state-dir is required") }
// Before anything touches NIO's singletons (the configuration's clock does): see below.
var eventLoops = 1
if let v = options.last(where: { $0.0 == "--event-loops" })?.1 {
    guard let n = Int(v), n > 0, n <= 64 else { usage("bad --event-loops") }
    eventLoops = n
}
NIOSingletons.groupLoopCountSuggestion = eventLoops
var config = TransferDaemonConfiguration(stateDirectory: stateDir)
for (k, v) in options {
    switch k {
    case "--extra-ca": config.extraCAFile = v
    case "--containers": config.containersDirectory = v
    case "--retry-base": guard let d = Double(v), d >= 0 else { usage("bad \(k)") }; config.retryBase = d
    case "--max-attempts": guard let n = Int(v), n > 0 else { usage("bad \(k)") }; config.maxAttempts = n
    case "--per-host": guard let n = Int(v), n > 0 else { usage("bad \(k)") }; config.perHostLimit = n
    case "--max-concurrent": guard let n = Int(v), n > 0 else { usage("bad \(k)") }; config.globalLimit = n
    case "--max-finishing": guard let n = Int(v), n > 0, n <= 4096 else { usage("bad \(k)") }; config.maxFinishing = n
    case "--read-timeout": guard let d = Double(v), d > 0 else { usage("bad \(k)") }; config.readTimeout = d
    case "--power": guard v == "plugged" || v == "battery" else { usage("bad \(k)") }; config.pluggedIn = v == "plugged"
    case "--network": guard let n = DeviceNetwork(rawValue: v) else { usage("bad \(k)") }; config.network = n
    case "--event-loops": break  // taken above
    case "--commit-bytes": guard let n = Int64(v), n > 0, n <= 1 << 20 else { usage("bad \(k)") }; config.commitBytes = n
    default: usage("unknown option \(k)")
    }
}
// Swift Concurrency's jobs run on NIO's singleton event loops, the loops AsyncHTTPClient
// uses: a transfer's steps (the client's callbacks, the daemon's tasks) hop between
// fewer threads. For 10,000 small downloads the daemon's CPU went from 3.4 s to 2.7 s.
// The daemon's few blocking calls (its SQLite commits, without fsync in WAL mode) then
// block a loop briefly; file writes and renames stay on NIO's thread pools.
//
// One loop by default (`--event-loops`): every step of a transfer (the actor, the
// attempt's task, the client's I/O) is then a job queued on the thread that runs it,
// with no wake-up of another thread. With two loops a request's cycle hopped between
// them four times; in `apphost-bench transfers` one loop took 10,000 small downloads
// from 1.62-1.68 s to 1.49-1.54 s, and the daemon's CPU from 1.23-1.26 s to 1.09-1.14 s.
_ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
let fd = Int32(ProcessInfo.processInfo.environment["APPHOST_TRANSFERD_FD"] ?? "3") ?? 3
do {
    try await TransferDaemon.run(configuration: config, fd: fd)
    exit(0)
} catch {
    FileHandle.standardError.write(Data("apphost-transferd: \(error)\n".utf8))
    exit(1)
}
