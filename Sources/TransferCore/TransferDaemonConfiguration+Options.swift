import TransferOptions

extension TransferDaemonConfiguration {
    /// The configuration a command line asks for (`apphost-transferd`'s options); what it
    /// does not name keeps its default.
    public init(_ options: TransferDaemonOptions) {
        self.init(stateDirectory: options.stateDirectory)
        containersDirectory = options.containers
        extraCAFile = options.extraCA
        retryBase = options.retryBase
        maxAttempts = options.maxAttempts
        perHostLimit = options.perHost
        globalLimit = options.maxConcurrent
        maxFinishing = options.maxFinishing
        readTimeout = options.readTimeout
        commitBytes = options.commitBytes
        pluggedIn = options.power == .plugged
        network = options.network
    }
}
