import AppHostProtocol

// The tests name apps with literals (`"com.example.probe"`, `"com.example.app\(i)"`)
// where the host takes a `BundleID`. A literal that breaks the rule is a mistake in the
// test, so it traps; the product has no such conformance and checks every identifier
// where it comes in.
// (Not in AppHostProtocolTests: there `BundleID("a b")` must stay the failable init.)
extension BundleID: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) {
        guard let id = BundleID(value) else { preconditionFailure("the test's literal \"\(value)\" is not a bundle identifier") }
        self = id
    }
}
