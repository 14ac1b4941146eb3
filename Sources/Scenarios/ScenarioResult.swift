import AppHostProtocol
import Foundation

/// What running one scenario file gave: the value the reports (text, JUnit, JSON, HTML)
/// are drawn from.
public struct ScenarioResult: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        /// Every step ran and every expectation held.
        case passed
        /// An expectation did not hold (``failure`` says which).
        case failed
        /// The scenario could not run: a bad file, an app that cannot be installed (``error``).
        case error
        /// The machine does not offer what the scenario `requires` (``error`` says what).
        case skipped
    }

    /// Where an expectation did not hold.
    public struct Failure: Sendable, Codable, Equatable {
        /// The step's index in `steps` (0-based) and its position in the file.
        public var step: Int
        public var line: Int
        public var column: Int
        /// The step as written, shortened (`expect: {probe: {state: background}}`).
        public var stepText: String
        public var expected: String
        public var seen: String
        /// Host time (virtual date) at which the expectation was checked last.
        public var time: Date?
        /// The last events of the apps concerned, one a line.
        public var recentEvents: [String]

        public init(step: Int, line: Int, column: Int, stepText: String, expected: String, seen: String,
                    time: Date?, recentEvents: [String]) {
            self.step = step
            self.line = line
            self.column = column
            self.stepText = stepText
            self.expected = expected
            self.seen = seen
            self.time = time
            self.recentEvents = recentEvents
        }
    }

    /// The scenario's `name` (the file's name when it has none, or could not be read).
    public var name: String
    /// The file, as found (relative to the directory given on the command line when below it).
    public var file: String
    /// The iOS rule it checks and where that rule comes from (`rule:`, `source:`).
    public var rule: String?
    public var source: String?
    public var status: Status
    public var failure: Failure?
    /// Why it could not run (status `error`), with file, line and column when known.
    public var error: String?
    /// Real time the scenario took (its private host's start to stop).
    public var seconds: Double
    /// The host's clock at the start (the epoch) and at the end.
    public var start: Date
    public var end: Date
    /// Alias → bundle identifier of the scenario's apps, in the order the file lists them.
    public var apps: [AppAlias]
    /// The private host's whole event log.
    public var events: [HostEvent]
    /// The termination reports it wrote (their codes are drawn on the timeline's kills).
    public var reports: [TerminationReport] = []
    /// The seed everything random in the run came from (device tokens, apns-ids): the
    /// same scenario with the same seed gives the same events (`apphost test --seed`).
    public var seed: UInt64 = ScenarioDefaults.seed

    public struct AppAlias: Sendable, Codable, Equatable {
        public var alias: String
        public var bundleIdentifier: String
        public init(alias: String, bundleIdentifier: String) {
            self.alias = alias
            self.bundleIdentifier = bundleIdentifier
        }
    }

    public init(name: String, file: String, rule: String? = nil, source: String? = nil, status: Status,
                failure: Failure? = nil, error: String? = nil, seconds: Double = 0,
                start: Date = ScenarioDefaults.epoch, end: Date = ScenarioDefaults.epoch,
                apps: [AppAlias] = [], events: [HostEvent] = []) {
        self.name = name
        self.file = file
        self.rule = rule
        self.source = source
        self.status = status
        self.failure = failure
        self.error = error
        self.seconds = seconds
        self.start = start
        self.end = end
        self.apps = apps
        self.events = events
    }
}

public enum ScenarioDefaults {
    /// Where a scenario's virtual clock starts unless it says `epoch:` (2025-01-01T00:00:00Z).
    public static let epoch = Date(timeIntervalSince1970: 1_735_689_600)
    /// The seed of a run that names none (`apphost test --seed` changes it).
    public static let seed: UInt64 = 0x5CE7_A210
}
