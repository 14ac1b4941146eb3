// apphost-transferd: the shared background-transfer daemon (iOS's background
// URLSession). Talks to the host over descriptor 3 (APPHOST_TRANSFERD_FD):
// TransferRequest frames in, TransferEvent frames out. Exits 0 at EOF.
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TransferCore
import TransferOptions

@main
struct TransferDaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apphost-transferd",
        abstract: "The shared background-transfer daemon: iOS's background URLSession for AppHost's apps.",
        discussion: """
            The host starts it (beside the apps' executables), restarts it after a crash and \
            stops it; apps never reach it. It reads TransferRequest frames from descriptor 3 \
            (or APPHOST_TRANSFERD_FD) and writes TransferEvent frames back, and exits at EOF. \
            Its queue and progress are in transfers.sqlite under --state-dir, so transfers go \
            on after its own crash, resumed with Range/If-Range.

            The host passes the options below; those of the host config's "transfers" object \
            (extraCA, perHost, maxConcurrent, retryBase, maxAttempts) become --extra-ca, \
            --per-host, --max-concurrent, --retry-base and --max-attempts.
            """)

    @OptionGroup var options: TransferDaemonOptions

    /// The entry point, in place of ArgumentParser's: its `main()` is not isolated, so it
    /// would run on Swift Concurrency's global executor, starting its thread pool before
    /// NIO's loops take its place. This one stays on the main thread until they have.
    @MainActor static func main() async {
        let command = parseOrExit()
        // Before anything touches NIO's singletons (the configuration's clock does): see below.
        NIOSingletons.groupLoopCountSuggestion = command.options.eventLoops
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
        do {
            try await command.run()
            Foundation.exit(0)
        } catch {
            FileHandle.standardError.write(Data("apphost-transferd: \(error)\n".utf8))
            Foundation.exit(1)
        }
    }

    func run() async throws {
        let fd = Int32(ProcessInfo.processInfo.environment["APPHOST_TRANSFERD_FD"] ?? "3") ?? 3
        try await TransferDaemon.run(configuration: TransferDaemonConfiguration(options), fd: fd)
    }
}
