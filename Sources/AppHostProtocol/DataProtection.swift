// Data protection: the classes a file can be written with, where a file keeps its
// class, and the levels the host closes files at while the device is locked.

/// A file's data-protection class, as `FileProtectionType` / `NSFileProtection*`.
public enum FileProtectionClass: String, Codable, Sendable, CaseIterable {
    /// `.complete`: unreadable while the device is locked.
    case complete
    /// `.completeUnlessOpen`: can be created while the device is locked; closed like
    /// `complete` at the lock, but a file the app has open stays usable through that
    /// descriptor (Apple: "If the file is opened when unlocked, you may continue to
    /// access the file normally, even if the user locks the device").
    case completeUnlessOpen
    /// `.completeUntilFirstUserAuthentication`: unreadable from boot until the first
    /// unlock, readable afterwards, locked or not (iOS's default).
    case completeUntilFirstUserAuthentication
    /// `.none`: always readable.
    case none

    /// The extended attribute that holds a file's class (in the `user` namespace, so the
    /// app that owns the file sets it itself, as iOS apps set `.protectionKey` on their
    /// own files). AppKitLess writes it; the host reads it when the device locks.
    public static let attribute = "user.apphost.protection"
}

/// Which files the host keeps closed, from the device's lock state.
public enum DataProtectionLevel: String, Codable, Sendable, Equatable {
    /// Unlocked: every file is open.
    case open
    /// Locked after the first unlock since boot: `complete` files are closed.
    case locked
    /// Locked and not unlocked since boot (the host started locked): `complete` and
    /// `completeUntilFirstUserAuthentication` files are closed.
    case lockedSinceBoot

    /// Whether files of `protection` are closed at this level.
    public func closes(_ protection: FileProtectionClass) -> Bool {
        switch (self, protection) {
        case (.open, _), (_, .none): false
        case (.locked, .complete), (.locked, .completeUnlessOpen), (.lockedSinceBoot, _): true
        case (.locked, .completeUntilFirstUserAuthentication): false
        }
    }
}
