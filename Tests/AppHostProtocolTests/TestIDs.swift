import AppHostProtocol

/// A bundle identifier written in a test. A literal that breaks the rule is a mistake in
/// the test, so it traps. (These tests check the rule itself with `BundleID("a b")`, so
/// they have no string-literal conformance, unlike the other test targets.)
func testID(_ literal: String) -> BundleID {
    guard let id = BundleID(literal) else { preconditionFailure("the test's literal \"\(literal)\" is not a bundle identifier") }
    return id
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
