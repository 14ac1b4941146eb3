import Testing

// The tags every test target shares, declared once here. Run or skip by tag (with a
// swift-testing that reads the `tag:` prefix: after Swift 6.3, see README):
//   swift test --filter tag:process     # only tests that start real processes
//   swift test --skip tag:network       # all but the loopback-server tests

extension Tag {
    /// Starts real processes (apps, the CLI, the transfer daemon, sandbox checks).
    @Tag public static var process: Self
    /// Moves a host's virtual clock: time rules checked without waiting for them.
    @Tag public static var virtualClock: Self
    /// Serves or connects over loopback sockets (the HTTP test server, the push gateway).
    @Tag public static var network: Self
    /// Takes over 10 s on its own on a 2-CPU machine (`swift test --no-parallel` prints
    /// each test's time): whole-system runs such as the shipped suite twice or the demo.
    /// Every other test stays under 10 s.
    @Tag public static var slow: Self
}
