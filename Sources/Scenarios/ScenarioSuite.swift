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
    /// `progress` hears each result as it comes.
    public func run(with runner: ScenarioRunner, jobs: Int,
                    progress: @escaping @Sendable (ScenarioResult) -> Void = { _ in }) async -> [ScenarioResult] {
        var results = [ScenarioResult?](repeating: nil, count: files.count)
        await withTaskGroup(of: (Int, ScenarioResult).self) { group in
            var next = 0
            func start() {
                let i = next
                let file = files[i]
                next += 1
                group.addTask { (i, await runner.run(path: file.path, display: file.display)) }
            }
            for _ in 0..<min(max(1, jobs), files.count) { start() }
            for await (i, r) in group {
                results[i] = r
                progress(r)
                if next < files.count { start() }
            }
        }
        return results.compactMap { $0 }
    }
}
