import ArgumentParser
import Host

// A host process (`daemon`, `run`) runs its Swift Concurrency jobs on NIO's event
// loops, chosen here, before the first task: once a job has run on libdispatch's
// global queues, its worker-pool monitor wakes the process every second for good
// (HostConcurrency.runOnEventLoops). Other verbs are short-lived clients and keep
// the default executor.
if let verb = CommandLine.arguments.dropFirst().first, verb == "daemon" || verb == "run" {
    _ = HostConcurrency.runOnEventLoops()
}
await runCommandLine()

/// What `@main` on an AsyncParsableCommand does (`AsyncParsableCommand.main()`). In a
/// function of its own: top-level code would pick the synchronous `run()` of an async command.
func runCommandLine() async {
    do {
        var command = try await AppHostCommand.asyncParseAsRoot(nil)
        if var asyncCommand = command as? AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    } catch {
        AppHostCommand.exit(withError: error)
    }
}
