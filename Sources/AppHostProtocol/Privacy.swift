import Foundation

// Privacy (TCC) as `simctl privacy` sets it: the actions, the services an app asks
// permission for, a service's decision, and the scope a command names.

/// A privacy decision (`simctl privacy`).
public enum PrivacyAction: String, Codable, Sendable, CaseIterable {
    case grant, revoke, reset
}

/// A privacy-protected service, named as `simctl privacy` names it (the raw value, kept
/// in the host's `privacy` table and on the control socket).
public enum PrivacyService: String, Codable, Sendable, CaseIterable {
    /// Calendar events.
    case calendar
    /// Contacts, limited access.
    case contactsLimited = "contacts-limited"
    /// Contacts.
    case contacts
    /// Location while in use (the location plugin reads it).
    case location
    /// Location always, in the background too (the location plugin reads it).
    case locationAlways = "location-always"
    /// Adding photos only.
    case photosAdd = "photos-add"
    /// The photo library.
    case photos
    /// The media library.
    case mediaLibrary = "media-library"
    /// The microphone.
    case microphone
    /// Motion and fitness.
    case motion
    /// Reminders.
    case reminders
    /// Siri.
    case siri
    /// The camera.
    case camera
}

/// What a privacy decision says about a service. The raw value is what the host's
/// `privacy` table holds; no row means not determined (after `reset`).
public enum PrivacyDecision: String, Codable, Sendable, CaseIterable {
    /// `apphost privacy grant`.
    case granted
    /// `apphost privacy revoke`.
    case denied
}

/// The services an `apphost privacy` command is about: one, or `all` of them. Coded
/// as the plain string (`"all"`, `"location-always"`, ...), so the control request
/// reads as it did when this was a string; an unknown name fails to decode.
public enum PrivacyScope: RawRepresentable, Codable, Sendable, Hashable, CaseIterable {
    /// Every service.
    case all
    /// One service.
    case service(PrivacyService)

    /// `all` or a service's name; nil for anything else.
    public init?(rawValue: String) {
        if rawValue == "all" {
            self = .all
        } else if let service = PrivacyService(rawValue: rawValue) {
            self = .service(service)
        } else {
            return nil
        }
    }

    /// `all` or the service's name.
    public var rawValue: String {
        switch self {
        case .all: "all"
        case .service(let service): service.rawValue
        }
    }

    /// `all` first, then every service, in `simctl privacy`'s order.
    public static var allCases: [PrivacyScope] { [.all] + PrivacyService.allCases.map { .service($0) } }

    /// The services it stands for.
    public var services: [PrivacyService] {
        switch self {
        case .all: PrivacyService.allCases
        case .service(let service): [service]
        }
    }
}
