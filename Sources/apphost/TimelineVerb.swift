import AppHostProtocol
import ArgumentParser
import Foundation
import Scenarios

extension AppHostCommand {
    struct TimelineCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "timeline",
            abstract: "Draw a host's events as a timeline, one lane per app, into an SVG or HTML file (needs no daemon).",
            discussion: """
                Reads the event log of the state directory (events.jsonl, and the rotated \
                events.<n>.jsonl before it) directly: the host may be running or stopped. Each \
                app gets a lane with its states as coloured bands (notRunning, inactive, active, \
                background, suspended) and a mark for each SIGSTOP, SIGCONT and SIGKILL, \
                callback, background task begun and ended, push, fetch, expiration deadline, \
                kill and warning; a kill shows its termination code (0x8badf00d, ...) when its \
                report is in <state dir>/reports. Hover a mark (in a browser) for its time, kind \
                and cause. The time axis runs from the first event drawn to the last.

                -o names the file, and its extension the format: .svg for the picture alone, \
                .html for a page with the picture and a table of the events (self-contained, \
                no script). The file is replaced whole if it exists; a directory is refused.

                At most the last --last events are read (of the apps named), and at most 20,000 \
                marks drawn: the picture says what it left out.

                Exit status: 0 written; 1 the log could not be read or the file written; 2 an \
                app that is not in the log; 64 a bad command line (-o neither .svg nor .html, \
                a directory, or in a folder that does not exist).

                Examples:
                  apphost timeline -o timeline.svg          # every app in the log
                  apphost timeline com.example.mail com.example.news -o mail.html
                  apphost timeline --state-dir /tmp/host --last 5000 -o recent.svg
                """)

        @Argument(help: ArgumentHelp("Only these apps, one lane each in this order (default: every app the log names, in order of first appearance).",
                                     valueName: "bundle-id"))
        var bundleIdentifiers: [BundleID] = []

        @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The file to write: name.svg or name.html.", valueName: "file"))
        var output: String

        @Option(name: .long, help: ArgumentHelp("Read at most the last N events of the apps.", valueName: "n"))
        var last: Int = 200_000

        @OptionGroup var state: StateOptions

        /// What `-o`'s extension asks for.
        enum Format { case svg, html }

        var format: Format? {
            switch (output as NSString).pathExtension.lowercased() {
            case "svg": .svg
            case "html", "htm": .html
            default: nil
            }
        }

        private var outputFile: OutputFile { OutputFile(output, example: "timeline.svg") }

        func validate() throws {
            guard last > 0 else { throw ValidationError("--last must be a positive number of events, got \(last)") }
            do throws(OutputFile.Failure) { try outputFile.check() } catch { throw ValidationError(error.description) }
            guard format != nil else {
                throw ValidationError("-o \(output): name an .svg file (the picture) or an .html file (a page with the picture and the events)")
            }
        }

        func run() throws {
            try reportingErrors {
                let dir = state.resolved
                let wanted = bundleIdentifiers
                let log: TimelineLogFiles
                do throws(TimelineLogFiles.Failure) {
                    log = try TimelineLogFiles.read(stateDirectory: dir, apps: wanted.isEmpty ? nil : Set(wanted), keepLast: last)
                } catch {
                    throw CLIError(description: error.description)
                }
                let unknown = wanted.filter { !log.bundleIdentifiers.contains($0) }
                if !unknown.isEmpty {
                    let present = log.bundleIdentifiers.isEmpty ? "it names no app"
                        : "it names \(log.bundleIdentifiers.prefix(20).map(\.rawValue).joined(separator: ", "))"
                            + (log.bundleIdentifiers.count > 20 ? " and \(log.bundleIdentifiers.count - 20) more" : "")
                    throw CLIError(description: "not in the event log of \(dir): \(unknown.map(\.rawValue).joined(separator: ", ")) (\(present))", exitCode: 2)
                }
                let lanes = wanted.isEmpty ? nil : wanted.map { TimelineLane(label: $0.rawValue, bundleIdentifier: $0) }
                var notes: [String] = []
                if log.dropped > 0 { notes.append("the last \(log.events.count) events drawn; \(log.dropped) earlier ones not read (--last)") }
                if log.skippedLines > 0 { notes.append("\(log.skippedLines) lines of the log were not events and were skipped") }
                let apps = Set(lanes?.map(\.bundleIdentifier) ?? log.bundleIdentifiers)
                let input = TimelineInput(title: "apphost timeline: \(dir)", events: log.events, lanes: lanes, markers: [],
                                          reports: TimelineLogFiles.reports(stateDirectory: dir, apps: apps), notes: notes)
                let text = format == .html ? Timeline.html(input) : Timeline.svg(input) + "\n"
                do throws(OutputFile.Failure) {
                    try outputFile.write(Array(text.utf8))
                } catch {
                    throw CLIError(description: error.description)
                }
                print("\(output): \(input.lanes.count) app\(input.lanes.count == 1 ? "" : "s"), \(log.events.count) event\(log.events.count == 1 ? "" : "s")")
            }
        }
    }
}
