import AppHostProtocol
import ArgumentParser
import Foundation
import Host
import Snapshots

extension AppHostCommand {
    struct SnapshotCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "snapshot",
            abstract: "Print an app's picture: a screenshot of an app in front, else its app-switcher snapshot.",
            discussion: """
                An app in the foreground with a window is a screenshot: drawn now as the screen \
                shows it (no snapshot policy; secure fields as bullets) into the state \
                directory's screenshots/ (the latest few are kept), with number 0 and reason \
                "screenshot". As on iOS, a screenshot never becomes or replaces the app's \
                switcher snapshot. Any other app prints its switcher snapshot: the one picture \
                kept per app, taken after didEnterBackground returns (and again when a \
                background fetch or silent push completes), drawn under the app's policy (its \
                AppHost.SnapshotPolicy in Info.plist, or the host's "snapshots": {"policy": ...} \
                when stricter) and kept as snapshots/<bundle-id>/switcher.png, with \
                switcher.json beside it (every visible string with its frame); each new one \
                replaces both. Prints the PNG's path.

                -o writes a copy of the PNG to a file (replaced whole if it exists; a directory \
                is refused).

                Example:
                  apphost snapshot com.example.bank -o bank.png
                """)
        @Argument(help: ArgumentHelp("The app.", valueName: "bundle-id")) var bundleIdentifier: BundleID
        @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Also write a copy of the PNG to this file.", valueName: "file.png"))
        var output: String?
        @OptionGroup var state: StateOptions
        @OptionGroup var json: JSONOption

        private func outputFile(_ path: String) -> OutputFile {
            OutputFile(path, example: "\(bundleIdentifier).png")
        }

        func validate() throws {
            guard let output else { return }
            do throws(OutputFile.Failure) { try outputFile(output).check() } catch { throw ValidationError(error.description) }
        }

        func run() throws {
            try reportingErrors {
                let r = try state.client.request(.snapshot(bundleIdentifier: bundleIdentifier)).checked()
                guard case .snapshot(let info) = r else { throw unexpected(r) }
                if let output {
                    guard let png = info.png else {
                        throw ControlError(.refused, "\(bundleIdentifier)'s snapshot policy is none: no picture is kept")
                    }
                    // The bytes first, then an atomic write: -o may name the kept file itself.
                    do throws(OutputFile.Failure) {
                        try outputFile(output).write(try OutputFile.read(png))
                    } catch {
                        throw CLIError(description: error.description)
                    }
                }
                if json.json { return try printJSON(.snapshot, info) }
                print(info.png ?? "(no picture kept: policy none)")
            }
        }
    }

    struct Switcher: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the apps in the app switcher, most recent first, with their snapshots.",
            discussion: """
                An app joins the switcher when it first becomes active and leaves it when the \
                user terminates it (apphost terminate) or it is uninstalled. Each shows its one \
                switcher snapshot, taken on its way to the background (never a screenshot \
                taken with apphost snapshot or io screenshot). --sheet draws those snapshots side by side into one PNG file (replaced whole if it exists; a \
                directory is refused).

                Example:
                  apphost switcher --sheet switcher.png
                """)
        @Option(name: .long, help: ArgumentHelp("Draw a contact sheet of the snapshots into this PNG file.", valueName: "out.png")) var sheet: String?
        @OptionGroup var state: StateOptions
        @OptionGroup var json: JSONOption

        private func sheetFile(_ path: String) -> OutputFile {
            OutputFile(path, example: "switcher.png")
        }

        func validate() throws {
            guard let sheet else { return }
            do throws(OutputFile.Failure) { try sheetFile(sheet).check() } catch { throw ValidationError(error.description) }
        }

        func run() throws {
            try reportingErrors {
                let r = try state.client.request(.switcher).checked()
                guard case .switcher(let entries) = r else { throw unexpected(r) }
                if let sheet { try drawSheet(entries, to: sheetFile(sheet)) }
                if json.json { return try printJSON(.switcher, entries) }
                if entries.isEmpty { return print("the app switcher is empty") }
                for e in entries {
                    let picture = e.snapshot.map { s in s.png.map { "\($0) (\(s.reason), \(s.policy.rawValue))" } ?? "no picture (policy none)" } ?? "no snapshot yet"
                    print("\(e.bundleIdentifier)  \(e.name)  \(e.state.rawValue)  \(picture)")
                }
                if let sheet { print("contact sheet: \(absolute(sheet))") }
            }
        }

        private func drawSheet(_ entries: [SwitcherEntry], to file: OutputFile) throws {
            var images: [(label: String, image: RGBAImage)] = []
            for e in entries {
                guard let png = e.snapshot?.png, let data = FileManager.default.contents(atPath: png) else { continue }
                do {
                    images.append((label: e.name, image: try PNGCodec.decode(data)))
                } catch {
                    throw ControlError(.internalError, "cannot read \(png): \(error)")
                }
            }
            guard !images.isEmpty else { throw ControlError(.refused, "no snapshots to draw: no app in the switcher has a picture") }
            let bytes: Data
            do {
                bytes = try PNGCodec.encode(try ContactSheet.make(images))
            } catch {
                throw ControlError(.internalError, "cannot draw the contact sheet: \(error)")
            }
            do throws(OutputFile.Failure) {
                try file.write(bytes)
            } catch {
                throw CLIError(description: error.description)
            }
        }
    }
}
