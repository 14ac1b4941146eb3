import ArgumentParser
import Foundation
import Host

// `--event-loop-executor` (HostOptions) on a host process (`daemon`, `run`): Swift
// Concurrency runs on NIO's event loops, chosen here, before the first task. Once a job
// has run on libdispatch's global queues, its worker-pool monitor wakes the process every
// second for good (HostConcurrency.runOnEventLoops). Off by default: the snapshot renders
// (detached tasks of tens of milliseconds) then share the two loops with the supervisor
// and delay suspend and resume by milliseconds (`apphost-bench suspend --nio-executor`).
let arguments = CommandLine.arguments.dropFirst()
if let verb = arguments.first, verb == "daemon" || verb == "run", arguments.contains("--event-loop-executor") {
    _ = HostConcurrency.runOnEventLoops()
}
await runCommandLine()

/// What `@main` on an AsyncParsableCommand does (`AsyncParsableCommand.main()`). In a
/// function of its own: top-level code would pick the synchronous `run()` of an async command.
func runCommandLine() async {
    do {
        // simctl's device argument (`apphost launch booted <id>`), checked and taken out.
        let arguments: [String]
        do {
            arguments = try DeviceArgument.strip(Array(CommandLine.arguments.dropFirst()))
        } catch {
            FileHandle.standardError.write(Data("apphost: \(error.description)\n".utf8))
            throw ExitCode(64)
        }
        var command = try await AppHostCommand.asyncParseAsRoot(arguments)
        if var asyncCommand = command as? AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    } catch {
        AppHostCommand.exit(withError: error)
    }
}
