import AppHostProtocol
@_exported import TestNumericIDLiterals

// The tests name apps with literals (`"com.example.probe"`, `"com.example.app\(i)"`)
// where the host takes a `BundleID`. A literal that breaks the rule is a mistake in the
// test, so it traps; the product has no such conformance and checks every identifier
// where it comes in.
// One copy for every test target that depends on this one (not AppHostProtocolTests:
// there `BundleID("a b")` must stay the failable init). The typed ids' literals are in
// TestNumericIDLiterals, which AppHostProtocolTests takes too; this module re-exports it.
extension BundleID: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) {
        guard let id = BundleID(value) else { preconditionFailure("the test's literal \"\(value)\" is not a bundle identifier") }
        self = id
    }
}
