import AppHostProtocol
import TestNumericIDLiterals

/// A bundle identifier written in a test. A literal that breaks the rule is a mistake in
/// the test, so it traps. (These tests check the rule itself with `BundleID("a b")`, so
/// they have no string-literal conformance, unlike the other test targets.)
func testID(_ literal: String) -> BundleID {
    guard let id = BundleID(literal) else { preconditionFailure("the test's literal \"\(literal)\" is not a bundle identifier") }
    return id
}
