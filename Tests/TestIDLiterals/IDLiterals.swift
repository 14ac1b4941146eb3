import AppHostProtocol

// The tests name apps with literals (`"com.example.probe"`, `"com.example.app\(i)"`)
// where the host takes a `BundleID`. A literal that breaks the rule is a mistake in the
// test, so it traps; the product has no such conformance and checks every identifier
// where it comes in.
// One copy for every test target that depends on this one (not AppHostProtocolTests:
// there `BundleID("a b")` must stay the failable init).
extension BundleID: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) {
        guard let id = BundleID(value) else { preconditionFailure("the test's literal \"\(value)\" is not a bundle identifier") }
        self = id
    }
}

// The ids the host keeps apart by type are numbers and strings in the tests' literals.
extension BackgroundTaskID: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int) { self.init(value) }
}
extension HostTimerID: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int) { self.init(value) }
}
extension TransferID: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: UInt64) { self.init(value) }
}
extension TransferTaskID: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int) { self.init(value) }
}
extension SessionIdentifier: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self.init(value) }
}
