import AppHostProtocol

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
