// BankApp: a banking screen for app-switcher snapshots and privacy checks. One
// executable behind three bundles (manifests/Bank*.app); what it does on leaving the
// foreground depends on the bundle identifier it was launched as:
//
// - com.example.bank (Bank.app): marks the balance privacy-sensitive, has a
//   password field, and declares the `redact` snapshot policy in its Info.plist;
//   it does nothing on resign: the host blanks what is sensitive. Passes a privacy check.
// - com.example.bank.leaky (BankLeaky.app): the same screen, the balance marked
//   sensitive, but no policy (so `default`) and nothing done on resign: its snapshot
//   shows the balance and the password field. Fails a privacy check.
// - com.example.bank.cover (BankCover.app): no policy, but in willResignActive it
//   puts an opaque full-screen cover (the bank's colour, logo and name) on top, and
//   takes it off in didBecomeActive, as Apple advises; launched in the background
//   (e.g. for a fetch) it starts covered. Passes under `default`.
//
// Another identifier behaves as the variant its last component names (`.leaky`,
// `.cover`), else as Bank, so tests can install copies under their own ids.
//
// The leaky and cover variants declare the `fetch` background mode and ask for
// fetches as often as allowed; each performFetch credits $25.00 to the balance (a
// change to the window, sent before the completion) and completes with newData, so
// a check through a fetch has a new balance to look for.
import AppKitLess
import Foundation

/// What the app does about snapshots, from its bundle identifier.
enum Variant: String {
    case bank, leaky, cover

    init(bundleIdentifier: String) {
        switch bundleIdentifier.split(separator: ".").last {
        case "leaky": self = .leaky
        case "cover": self = .cover
        default: self = .bank
        }
    }

    /// Whether it asks for background fetches (its Info.plist declares `fetch`).
    var fetches: Bool { self != .bank }
    /// Whether it covers itself while not active.
    var covers: Bool { self == .cover }
}

/// The bank's colours.
enum Palette {
    static let brand = RGBA(0, 82, 147)
    static let background = RGBA(242, 242, 247)
    static let secondaryText = RGBA(60, 60, 67)
}

func say(_ line: String) {
    print(line)
    fflush(nil)  // stdout is a log file: flush so each line is there at once
}

private func rect(_ x: Double, _ y: Double, _ width: Double, _ height: Double) -> Rect {
    Rect(x: x, y: y, width: width, height: height)
}

/// "$12,345.67" for 1234567 cents.
func dollars(_ cents: Int) -> String {
    let whole = String(cents / 100)
    var grouped = ""
    for (index, digit) in whole.enumerated() {
        if index > 0 && (whole.count - index) % 3 == 0 { grouped.append(",") }
        grouped.append(digit)
    }
    let fraction = cents % 100
    return "$\(grouped).\(fraction < 10 ? "0" : "")\(fraction)"
}

/// The account screen (frames in points, each relative to its parent; 390 × 844 screen).
@MainActor
final class AccountScreen {
    let window = Window(backgroundColor: Palette.background)
    let balance: Label
    let password: SecureTextField
    let status: Label
    /// The full-screen cover while it is on.
    private var cover: View?

    init(balanceCents: Int) {
        let header = View(frame: rect(0, 0, 390, 132), backgroundColor: Palette.brand)
        header.addSubview(Label(text: "Example Bank", frame: rect(20, 64, 260, 44), fontSize: 28, textColor: .white))
        header.addSubview(ImageView(named: "logo.png", frame: rect(314, 56, 56, 56)))

        let card = View(frame: rect(16, 152, 358, 176), backgroundColor: .white)
        card.addSubview(Label(text: "Everyday Account", frame: rect(16, 16, 326, 24)))
        card.addSubview(Label(text: "Ada Lovelace - 4821", frame: rect(16, 44, 326, 22), fontSize: 15,
                              textColor: Palette.secondaryText))
        card.addSubview(Label(text: "Available balance", frame: rect(16, 80, 326, 20), fontSize: 13,
                              textColor: Palette.secondaryText))
        balance = Label(text: dollars(balanceCents), frame: rect(16, 104, 326, 52), fontSize: 40)
        balance.isPrivacySensitive = true
        card.addSubview(balance)

        let passwordCaption = Label(text: "Password", frame: rect(20, 352, 350, 22), fontSize: 15,
                                    textColor: Palette.secondaryText)
        password = SecureTextField(text: "hunter2-Bank!", frame: rect(16, 378, 358, 48), backgroundColor: .white)
        status = Label(text: "Updated at launch", frame: rect(20, 442, 350, 20), fontSize: 13,
                       textColor: Palette.secondaryText)

        for view in [header, card, passwordCaption, password, status] { window.addSubview(view) }
    }

    var isCovered: Bool { cover != nil }

    /// Puts the opaque cover on top of everything: the brand colour, the logo and the name.
    func addCover() {
        guard cover == nil else { return }
        let cover = View(frame: Window.bounds, backgroundColor: Palette.brand)
        cover.addSubview(ImageView(named: "logo.png", frame: rect(147, 334, 96, 96)))
        cover.addSubview(Label(text: "Example Bank", frame: rect(105, 446, 200, 40), fontSize: 28, textColor: .white))
        window.addSubview(cover)
        self.cover = cover
    }

    func removeCover() {
        cover?.removeFromSuperview()
        cover = nil
    }
}

final class BankDelegate: ApplicationDelegate {
    private var variant = Variant.bank
    private var screen: AccountScreen?
    private var balanceCents = 1_234_567
    private var fetches = 0

    func didFinishLaunching(_ application: Application, options: LaunchOptions) -> Bool {
        variant = Variant(bundleIdentifier: application.bundleIdentifier)
        log("didFinishLaunching", application, extra: " variant=\(variant.rawValue) reason=\(options.reason)")
        let screen = AccountScreen(balanceCents: balanceCents)
        self.screen = screen
        // Launched straight into the background (a fetch): never shown, so covered at once.
        if variant.covers && application.applicationState == .background {
            screen.addCover()
            say("[BankApp] cover on")
        }
        application.window = screen.window
        if variant.fetches {
            do {
                try application.setMinimumBackgroundFetchInterval(.minimum)
            } catch {
                say("[BankApp] setMinimumBackgroundFetchInterval failed: \(error)")
            }
        }
        return true
    }

    func willResignActive(_ application: Application) {
        log("willResignActive", application)
        if variant.covers {
            screen?.addCover()
            say("[BankApp] cover on")
        }
    }

    func didEnterBackground(_ application: Application) { log("didEnterBackground", application) }
    func willEnterForeground(_ application: Application) { log("willEnterForeground", application) }

    func didBecomeActive(_ application: Application) {
        log("didBecomeActive", application)
        if let screen, screen.isCovered {
            screen.removeCover()
            say("[BankApp] cover off")
        }
    }

    func willTerminate(_ application: Application) { log("willTerminate", application) }

    func performFetch(_ application: Application, completion: @escaping @Sendable (FetchResult) -> Void) {
        fetches += 1
        balanceCents += 2_500
        screen?.balance.text = dollars(balanceCents)
        screen?.status.text = "Updated by background fetch \(fetches)"
        // The balance itself stays out of the log: it is what the check looks for.
        log("performFetch", application, extra: " fetch=\(fetches) result=newData")
        completion(.newData)
    }

    private func log(_ callback: String, _ application: Application, extra: String = "") {
        say("[BankApp] \(callback) state=\(application.applicationState)\(extra)")
    }
}

ApplicationMain(delegate: BankDelegate())
