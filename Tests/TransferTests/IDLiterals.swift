// The tests' literals for BundleID and the typed ids (one definition, in Tests/TestIDLiterals).
// Imported once here: a conformance is seen by every file of the target.
import TestIDLiterals
