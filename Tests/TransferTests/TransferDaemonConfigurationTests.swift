import AppHostProtocol
import Testing
import TransferCore
import TransferOptions

/// The daemon's configuration from its command line: the options' defaults are the
/// configuration's, and every option lands in its setting.
@Suite struct TransferDaemonConfigurationTests {
    @Test func theOptionsDefaultsAreTheConfigurations() {
        let parsed = TransferDaemonConfiguration(TransferDaemonOptions(stateDirectory: "/s"))
        let standard = TransferDaemonConfiguration(stateDirectory: "/s")
        #expect(parsed.stateDirectory == standard.stateDirectory)
        #expect(parsed.containersDirectory == standard.containersDirectory && parsed.extraCAFile == standard.extraCAFile)
        #expect(parsed.retryBase == standard.retryBase && parsed.maxAttempts == standard.maxAttempts)
        #expect(parsed.perHostLimit == standard.perHostLimit && parsed.globalLimit == standard.globalLimit)
        #expect(parsed.maxFinishing == standard.maxFinishing && parsed.readTimeout == standard.readTimeout)
        #expect(parsed.commitBytes == standard.commitBytes)
        #expect(parsed.pluggedIn == standard.pluggedIn && parsed.network == standard.network)
    }

    @Test func everyOptionLandsInItsSetting() {
        var options = TransferDaemonOptions(stateDirectory: "/s")
        (options.containers, options.extraCA, options.retryBase, options.maxAttempts) = ("/c", "/ca.pem", 0.5, 3)
        (options.perHost, options.maxConcurrent, options.maxFinishing) = (2, 5, 7)
        (options.readTimeout, options.commitBytes, options.power, options.network) = (9, 4096, .plugged, .cellular)
        // `--event-loops` is NIO's, set before the configuration exists (the daemon's main).
        let c = TransferDaemonConfiguration(options)
        #expect(c.stateDirectory == "/s" && c.containersDirectory == "/c" && c.extraCAFile == "/ca.pem")
        #expect(c.retryBase == 0.5 && c.maxAttempts == 3 && c.perHostLimit == 2 && c.globalLimit == 5)
        #expect(c.maxFinishing == 7 && c.readTimeout == 9 && c.commitBytes == 4096)
        #expect(c.pluggedIn && c.network == .cellular)
    }
}
