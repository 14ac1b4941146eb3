import Foundation

/// The scenario files of a suite: found below the paths given, filtered, sharded, and
/// run a few at a time.
public struct ScenarioSuite: Sendable {
    /// A file of the suite: its absolute path, and how reports name it (relative to the
    /// directory it was found under, prefixed by that directory as given).
    public struct File: Sendable, Equatable {
        public var path: String
        public var display: String
    }

    public static let extensions = ["yaml", "yml", "json"]
    /// At most this many files in one run.
    public static let maximumFiles = 10_000

    public var files: [File]

    /// The files below `paths` (a file is taken as it is, whatever its extension; a
    /// directory for every `*.yaml`, `*.yml` and `*.json` below it, sorted by path).
    public static func discover(_ paths: [String]) throws(ScenarioError) -> ScenarioSuite {
        var files: [File] = []
        var seen = Set<String>()
        for given in paths {
            let absolute = given.hasPrefix("/") ? given : FileManager.default.currentDirectoryPath + "/" + given
            let path = (absolute as NSString).standardizingPath
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw ScenarioError(file: given, "no such file or directory")
            }
            if !isDirectory.boolValue {
                if seen.insert(path).inserted { files.append(File(path: path, display: given)) }
                continue
            }
            guard let walker = FileManager.default.enumerator(atPath: path) else {
                throw ScenarioError(file: given, "cannot list this directory")
            }
            var found: [String] = []
            while let relative = walker.nextObject() as? String {
                guard extensions.contains((relative as NSString).pathExtension.lowercased()) else { continue }
                found.append(relative)
                guard found.count <= maximumFiles else {
                    throw ScenarioError(file: given, "over \(maximumFiles) scenario files below it")
                }
            }
            let prefix = given.hasSuffix("/") ? given : given + "/"
            for relative in found.sorted() {
                let full = path + "/" + relative
                if seen.insert(full).inserted { files.append(File(path: full, display: prefix + relative)) }
            }
        }
        return ScenarioSuite(files: files)
    }

    /// Only the files whose path or scenario name contains `text` (case-insensitive).
    /// The name is read from the file (a file that cannot be read is kept, to report it).
    public func filtered(_ text: String) -> ScenarioSuite {
        let needle = text.lowercased()
        return ScenarioSuite(files: files.filter { f in
            if f.display.lowercased().contains(needle) { return true }
            guard let s = try? ScenarioReader.read(path: f.path) else { return false }
            return s.name.lowercased().contains(needle)
        })
    }

    /// Part `index` (1-based) of `count`: the files dealt round-robin in path order, so
    /// the parts are disjoint, their union is the suite, and the same suite always gives
    /// the same parts.
    public func shard(_ index: Int, of count: Int) -> ScenarioSuite {
        ScenarioSuite(files: files.enumerated().filter { $0.offset % count == index - 1 }.map(\.element))
    }

    /// Parses `i/n` (1 ≤ i ≤ n ≤ 1000).
    public static func parseShard(_ text: String) -> (index: Int, count: Int)? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let i = Int(parts[0]), let n = Int(parts[1]), n >= 1, n <= 1000, i >= 1, i <= n else { return nil }
        return (i, n)
    }

    /// Runs every file with `runner`, `jobs` at a time; results in the suite's order.
    /// `progress` hears each result as it comes. With `repeat` above 1 each file runs that
    /// many times (the runs of all files share the `jobs`) and gives one result: the first
    /// run's, or the first run that did not pass, or a failure naming the first event in
    /// which a run differs from the first (``EventComparison``): the same scenario and
    /// seed must give the same events, however loaded the machine.
    public func run(with runner: ScenarioRunner, jobs: Int, repeat runs: Int = 1,
                    progress: @escaping @Sendable (ScenarioResult) -> Void = { _ in }) async -> [ScenarioResult] {
        let runs = max(1, runs)
        var results = [[ScenarioResult?]](repeating: [ScenarioResult?](repeating: nil, count: runs), count: files.count)
        var folded = [ScenarioResult?](repeating: nil, count: files.count)
        let total = files.count * runs
        await withTaskGroup(of: (Int, Int, ScenarioResult).self) { group in
            var next = 0
            func start() {
                // Run k of every file before run k + 1 of any: a file's runs spread over the whole run.
                let (k, i) = next.quotientAndRemainder(dividingBy: files.count)
                let file = files[i]
                next += 1
                group.addTask { (i, k, await runner.run(path: file.path, display: file.display)) }
            }
            for _ in 0..<min(max(1, jobs), total) { start() }
            for await (i, k, r) in group {
                results[i][k] = r
                let done = results[i].compactMap { $0 }
                if done.count == runs {
                    let result = Self.fold(done)
                    folded[i] = result
                    progress(result)
                }
                if next < total { start() }
            }
        }
        return folded.compactMap { $0 }
    }

    /// One result for the runs of one file, in run order (see ``run(with:jobs:repeat:progress:)``).
    static func fold(_ runs: [ScenarioResult]) -> ScenarioResult {
        guard let first = runs.first else { preconditionFailure("no runs to fold") }
        guard runs.count > 1 else { return first }
        var seconds = 0.0
        for r in runs { seconds += r.seconds }
        if let (k, bad) = runs.enumerated().first(where: { $0.element.status == .failed || $0.element.status == .error }) {
            var result = bad
            result.seconds = seconds
            let note = "run \(k + 1) of \(runs.count)"
            if result.status == .error {
                result.error = "\(note): " + (result.error ?? "could not run")
            } else if var failure = result.failure {
                failure.seen += " (\(note))"
                result.failure = failure
            }
            return result
        }
        var result = first
        result.seconds = seconds
        for (k, r) in runs.enumerated().dropFirst() {
            guard let (at, left, right) = EventComparison.firstDifference(first.events, r.events) else { continue }
            result.status = .failed
            result.failure = ScenarioResult.Failure(
                step: 0, line: 1, column: 1, stepText: "(--repeat \(runs.count): the events of every run)",
                expected: "run \(k + 1)'s events to be run 1's (the same scenario and seed)",
                seen: "they differ at event \(at + 1):\n        run 1: \(left)\n        run \(k + 1): \(right)",
                time: nil, recentEvents: [])
            return result
        }
        return result
    }
}
