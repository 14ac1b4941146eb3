// The ProbeApp's argument grammar: what to do at which callback.
import AppKitLess

/// The callbacks and service events a probe can act on, by short name.
enum Trigger: String, CaseIterable, Sendable {
    case launch, resign, background, foreground, active, terminate
    /// Location fixes arrived.
    case location
    /// The location authorization changed.
    case authorization
    /// A monitored region was entered or left.
    case region
    /// A VoIP push arrived.
    case voipPush = "voip-push"
    /// A BLE scan discovered a peripheral.
    case bleDiscovered = "ble-discovered"
    /// A BLE connection completed.
    case bleConnected = "ble-connected"
    /// A BLE connection ended.
    case bleDisconnected = "ble-disconnected"
    /// A connected peripheral's characteristic notified a value.
    case bleNotify = "ble-notify"
    /// An external accessory connected.
    case accessoryConnected = "accessory-connected"
    /// An external accessory disconnected.
    case accessoryDisconnected = "accessory-disconnected"
    /// An external accessory sent bytes.
    case accessoryData = "accessory-data"
    /// An audio interruption began or ended.
    case interruption
    /// The host asked for a background fetch (`performFetch`).
    case fetch
    /// A remote notification arrived (silent or not).
    case push
    /// A BGTaskScheduler task was launched.
    case bgtask
    /// A BGTask's time is running out (its expiration handler runs).
    case bgtaskExpire = "bgtask-expire"
    /// handleEventsForBackgroundURLSession ran.
    case urlEvents = "url-events"
    /// A background download finished (the file was moved).
    case downloadFinished = "download-finished"
    /// A background task completed (with or without an error).
    case taskCompleted = "task-completed"
    /// A background task's first progress callback.
    case progress
    /// A host timer (`timer:` action) fired.
    case timer
    /// `applicationDidReceiveMemoryWarning` (the device is short of memory).
    case memoryWarning = "memory-warning"
    /// `protectedDataWillBecomeUnavailable` (the device locks).
    case dataUnavailable = "data-unavailable"
    /// `protectedDataDidBecomeAvailable` (the device unlocks).
    case dataAvailable = "data-available"
}

/// What the probe's handleEventsForBackgroundURLSession does with its completion (`--events-completion`).
enum EventsCompletionPlan: String, Equatable, Sendable {
    /// Call it at once (after making the session if needed).
    case now
    /// Never call it.
    case never
    /// Call it in urlSessionDidFinishEvents, as iOS apps do.
    case finish
}

/// How the probe answers a completion handler (`--fetch-result`, `--push-result`).
enum CompletionPlan: Equatable, Sendable {
    /// Call it at once with this result.
    case now(FetchResult)
    /// Never call it.
    case never
    /// Call it after `seconds` with this result.
    case after(seconds: Double, FetchResult)
}

/// How the probe ends a launched BGTask (`--bgtask`).
enum TaskPlan: Equatable, Sendable {
    /// `setTaskCompleted(success: true)` at once.
    case complete
    /// Never complete it.
    case never
    /// Complete it (success) after `seconds`, unless its expiration handler already did.
    case after(seconds: Double)
}

/// What the probe's BGTask expiration handler does (`--bgtask-expire`).
enum ExpirePlan: String, Equatable, Sendable {
    /// `setTaskCompleted(success: false)`.
    case complete
    /// Only print.
    case ignore
}

/// The kind of a `bg-submit` request.
enum TaskKind: String, Equatable, Sendable {
    case refresh, processing
}

/// A socket family `socket:` tries.
enum SocketFamily: String, CaseIterable, Sendable {
    case bluetooth, inet, unix
}

/// One thing the probe does when its trigger fires.
enum Action: Equatable, Sendable {
    /// Print `text` on its own line to stdout.
    case print(String)
    /// Begin a task named `name`; end it after `seconds` (0: never), unless it already ended.
    case holdTask(name: String, seconds: Double)
    /// Begin `count` tasks named `prefix`1 ... `prefix``count`.
    case holdTasks(count: Int, prefix: String)
    /// Begin a task named `name`.
    case beginTask(name: String)
    /// End the latest task begun as `name` (again, if it already ended).
    case endTask(name: String)
    /// Block the main thread for `seconds`.
    case block(seconds: Double)
    /// Block the main thread forever, asleep.
    case blockForever
    /// Keep the main thread busy (running, never asleep) for `seconds` of real time.
    case spin(seconds: Double)
    /// Writes this many MiB of `x` to stdout at once (its log's bounds).
    case logFlood(mebibytes: Int)
    /// Once the current callback has returned, block the main thread forever.
    case hang
    /// Once the current callback has returned, block the main thread until one byte
    /// can be read from the FIFO at `path` (a test opening it for writing knows the
    /// main thread is in that turn once its open returns).
    case hangFIFO(path: String)
    /// Block the main thread until one byte can be read from the FIFO at `path`.
    case waitFIFO(path: String)
    /// Allocate and touch `mebibytes` MiB, keeping it, then tell the host its footprint
    /// changed (`Application.footprintDidChange()`).
    case allocate(mebibytes: Int)
    /// Fork `count` children that sleep for good (kept: they die with the app, or not).
    case fork(count: Int)
    /// Fork up to `count` sleeping children, stopping at the first failure; print how
    /// many it got, then kill and reap them.
    case forkLimit(count: Int)
    /// Fork a child that allocates and touches `mebibytes` MiB, then exits; wait for it
    /// and print how it ended.
    case forkAllocate(mebibytes: Int)
    /// posix_spawn the program at `path` and wait for it; print how it ended or the
    /// spawn's errno.
    case spawn(path: String)
    /// Start up to `count` threads, stopping at the first failure; print how many it
    /// got, then end and join them.
    case threads(count: Int)
    /// Write `bytes` bytes to `path` (in 1 MiB writes), printing how many were written.
    case writeFile(path: String, bytes: Int64)
    /// Take an exclusive `flock` on `path` (created if missing) and keep it.
    case lock(path: String)
    /// Take a POSIX (`fcntl` F_SETLK) write lock on all of `path` (created if missing) and keep it.
    case posixLock(path: String)
    /// Release every lock held on `path` (as spelled in `lock`/`posix-lock`).
    case unlock(path: String)
    /// Exit at once with `code`.
    case exit(code: Int32)
    /// Crash (fatalError).
    case crash
    /// Write a frame whose payload is not JSON straight to the IPC socket.
    case garbage
    /// Write a frame header announcing 100 MiB straight to the IPC socket.
    case oversized
    /// Print `backgroundTimeRemaining`.
    case timeRemaining
    /// Show a window with one label reading `text` (or change the label's text).
    case window(text: String)
    /// `ignoreSnapshotOnNextApplicationLaunch()`.
    case ignoreSnapshot
    /// Schedule host timer `name` (AppKitLess `HostTimer`) `seconds` from now, repeating
    /// every `seconds` when `repeats`. `seconds` is taken as written (NaN, infinite,
    /// negative), so a test can show the host's bounds.
    case timer(name: String, seconds: Double, repeats: Bool)
    /// Invalidate host timer `name`.
    case invalidateTimer(name: String)
    /// Schedule `count` one-shot host timers `seconds` from now (stopping at the first refusal).
    case timers(count: Int, seconds: Double)
    /// Schedule and at once invalidate `count` host timers, one after the other.
    case timerChurn(count: Int)

    // Services: each prints "[ProbeApp] <keyword>: ok" or "... refused: <reason>".
    /// Play `seconds` of a 440 Hz tone at 8000 Hz (one `play` call).
    case audioPlay(seconds: Double)
    /// Stop audio (`setActive(false)`).
    case audioStop
    /// Ask for always or when-in-use location authorization.
    case locationAuth(always: Bool)
    /// `startUpdatingLocation`.
    case locationStart
    /// `stopUpdatingLocation`.
    case locationStop
    /// `allowsBackgroundLocationUpdates = on`.
    case locationBackground(Bool)
    /// `start|stopMonitoringSignificantLocationChanges`.
    case significantChanges(Bool)
    /// `startMonitoring(for:)` a circular region.
    case monitorRegion(CircularRegion)
    /// `stopMonitoring(for:)` the region with this identifier.
    case stopRegion(identifier: String)
    /// Print `monitoredRegions`.
    case regions
    /// Register for VoIP pushes; prints the token.
    case voipRegister
    /// Report an incoming call with a fresh UUID.
    case reportCall
    /// End the last reported call.
    case endCall
    /// Scan for peripherals with these services (nil: any).
    case bleScan(services: [String]?)
    /// Stop scanning.
    case bleStopScan
    /// Connect to a peripheral.
    case bleConnect(id: String)
    /// Advertise these services.
    case bleAdvertise(services: [String])
    /// Stop advertising.
    case bleStopAdvertise
    /// List the connected accessories.
    case accessoryList
    /// `registerForRemoteNotifications`; the token or failure is printed when the delegate hears.
    case registerPush
    /// Try `socket(2)` in a family.
    case socket(SocketFamily)
    /// Try `open(2)` O_RDWR on a path.
    case open(path: String)
    /// Open a path read-only and read from it.
    case read(path: String)
    /// Open a path read-only and keep the descriptor (at most 64).
    case holdOpen(path: String)
    /// Read from the descriptor `hold-open:` kept for a path.
    case readHeld(path: String)
    /// Open a path for writing (created if missing, appended to, nothing written).
    case write(path: String)
    /// Write a few bytes to PATH with a data-protection class (`Data.writeProtected`).
    case writeProtected(path: String, protection: FileProtectionClass)
    /// Print `isProtectedDataAvailable`.
    case protectedData
    /// `kill(2)` a pid with a signal (0: only the permission check).
    case kill(pid: Int32, signal: Int32)
    /// Print the capability sets from /proc/self/status.
    case capabilities
    /// Print an App Group's container (`FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`).
    case group(identifier: String)
    /// `setMinimumBackgroundFetchInterval`.
    case fetchInterval(FetchInterval)
    /// Print `backgroundRefreshStatus`.
    case refreshStatus
    /// Register a BGTaskScheduler launch handler for an identifier.
    case bgRegister(identifier: String)
    /// Submit a BGTaskScheduler request, earliest `seconds` from now (nil: no earliest date).
    case bgSubmit(kind: TaskKind, identifier: String, seconds: Double?, power: Bool, network: Bool)
    /// Cancel a pending request (nil: all of them).
    case bgCancel(identifier: String?)
    /// List the pending requests.
    case bgPending
    /// Make background session ID (if the probe has not yet) and list its tasks;
    /// a session it makes here is discretionary, Wi-Fi only and/or without launch events as asked.
    case urlSession(id: String, discretionary: Bool = false, wifiOnly: Bool = false, noLaunchEvents: Bool = false)
    /// Start a download of URL in session ID.
    case download(session: String, url: String)
    /// Start `count` downloads in session ID, of `url` with `{n}` replaced by 1...count.
    case downloads(session: String, count: Int, url: String)
    /// Make a data task in session ID (a programmer error: iOS raises and the app aborts).
    case dataTask(session: String, url: String)
    /// Start an upload of FILE to URL in session ID.
    case upload(session: String, url: String, file: String)
    /// Cancel task N of session ID.
    case cancelTask(session: String, task: Int)
    /// Cancel task N of session ID with resume data, saved to Documents/resume-N.plist.
    case cancelResume(session: String, task: Int)
    /// Start a download from the resume data in FILE (read, then deleted).
    case downloadResume(session: String, file: String)
    /// List session ID's tasks (getAllTasks).
    case urlTasks(session: String)
}

/// A parsed command line.
struct Script: Equatable, Sendable {
    /// Actions per trigger, in command-line order.
    var actions: [Trigger: [Action]] = [:]
    /// Expiration handlers log but do not end their task.
    var ignoreExpiration = false
    /// How `performFetch` is answered.
    var fetchResult = CompletionPlan.now(.newData)
    /// How a remote notification is answered.
    var pushResult = CompletionPlan.now(.newData)
    /// How a launched BGTask is completed.
    var bgTask = TaskPlan.complete
    /// What a BGTask's expiration handler does.
    var bgTaskExpire = ExpirePlan.complete
    /// What handleEventsForBackgroundURLSession does with its completion.
    var eventsCompletion = EventsCompletionPlan.now

    /// Most tasks one `hold-tasks` may begin.
    static let maximumTaskCount = 10_000
    /// Most timers one `timers` or `timer-churn` may schedule.
    static let maximumTimerCount = 100_000
    /// Most downloads one `downloads` may start.
    static let maximumDownloadCount = 100_000
    /// Most processes or threads one `fork`, `fork-limit` or `threads` may start.
    static let maximumProcessCount = 10_000
    /// Longest tone one `audio-play` may play, in seconds.
    static let maximumToneSeconds = 60.0

    static let usage = """
        usage: ProbeApp [--on TRIGGER ACTION]... [--ignore-expiration] [--fetch-result PLAN]
                        [--push-result PLAN] [--bgtask complete|never|after:SECONDS]
                        [--bgtask-expire complete|ignore] [--events-completion now|never|finish] [--help]
               ProbeApp --raw-unread N   (no AppKitLess: hello, N backgroundTimeRemaining
                                          requests, then sleep reading no answer)

        A scripted AppHost app: at each callback it runs the actions given for it,
        in order, after printing "[ProbeApp] <delegate method> state=<state>".
        Arguments are also read from ProbeApp.args in the bundle (beside Info.plist)
        and from $HOME/Library/Preferences/ProbeApp.args, one per line, in that order,
        before those of the command line: the host relaunches an app in the background
        with no arguments, and privacy-check launches it with none, so a test scripts
        those launches with the files.
        Each action prints a "[ProbeApp] ..." line (print:TEXT prints TEXT);
        failures go to stderr as "ProbeApp: ...".

        TRIGGER, a lifecycle callback:
          launch | resign | background | foreground | active | terminate
        or a service event, which always prints its line (even with no actions):
          location                 a fix arrived: "[ProbeApp] location LAT,LON" (one per fix)
          authorization            "[ProbeApp] authorization STATUS" (notDetermined,
                                   denied, whenInUse, always)
          voip-push                "[ProbeApp] voip push PAYLOAD" (report-call answers it)
          ble-discovered           "[ProbeApp] ble discovered ID"
          ble-connected            "[ProbeApp] ble connected ID"
          ble-disconnected         "[ProbeApp] ble disconnected ID"
          ble-notify               "[ProbeApp] ble notify ID CHARACTERISTIC VALUE" (VALUE
                                   as UTF-8 text, or 0x-hex if it is not printable)
          accessory-connected      "[ProbeApp] accessory connected ID NAME PROTOCOLS"
          accessory-disconnected   "[ProbeApp] accessory disconnected ID NAME"
          accessory-data           "[ProbeApp] accessory data NAME PROTOCOL: BYTES" (UTF-8)
          interruption             "[ProbeApp] interruption began|ended: REASON"
          fetch                    performFetch: "[ProbeApp] performFetch id=N state=STATE"; the
                                   actions run, then the completion per --fetch-result, printing
                                   "[ProbeApp] fetch completed RESULT" just before it is called
          push                     a remote notification: "[ProbeApp] remote notification
                                   silent=true|false userInfo=JSON"; the actions run, then the
                                   completion per --push-result ("[ProbeApp] push completed RESULT")
          bgtask                   a BGTaskScheduler launch: "[ProbeApp] bgtask launch ID refresh|processing";
                                   the actions run, then the task is completed per --bgtask
                                   ("[ProbeApp] bgtask completed ID" just before setTaskCompleted)
          bgtask-expire            the task's expiration handler: "[ProbeApp] bgtask expired ID";
                                   the actions run, then per --bgtask-expire
          url-events               handleEventsForBackgroundURLSession: "[ProbeApp] handleEvents SESSION";
                                   the probe makes the session if it has not, the actions
                                   run, then the completion per --events-completion
                                   ("[ProbeApp] events completed SESSION" just before it is called)
          download-finished        a background download finished: the file is moved to
                                   Documents/downloads/N in the container, printing
                                   "[ProbeApp] downloaded task=N to PATH bytes=B"
          task-completed           "[ProbeApp] task N completed error=CODE|nil"; a task the system
                                   cancelled adds " code=-999 NSURLErrorBackgroundTaskCancelledReasonKey=R
                                   (NAME)" (0 userForceQuitApplication, 1 backgroundUpdatesDisabled)
          progress                 a task's first progress callback: "[ProbeApp] progress task=N bytes=B"
          timer                    a host timer (timer: action) fired: "[ProbeApp] timer NAME fired N
                                   state=STATE" (N counts its fires)
          memory-warning           applicationDidReceiveMemoryWarning: "[ProbeApp] didReceiveMemoryWarning
                                   state=STATE" (only while running code: never when suspended)
        (urlSessionDidFinishEvents prints "[ProbeApp] didFinishEvents SESSION".)
        The probe creates its location manager, push registry, BLE central and
        accessory delegate at start, so every event has a receiver; launch handlers
        come from bg-register actions (give them with --on launch).

        ACTION:
          print:TEXT               print TEXT on its own line
          hold-task:NAME:SECONDS   begin task NAME, end it after SECONDS (0 = never) on a
                                   host timer (host clock: virtual time under --clock virtual);
                                   not again if it already ended (e.g. on expiration)
          hold-tasks:N:PREFIX      begin N tasks (1-\(maximumTaskCount)) named PREFIX1 ... PREFIXN
          begin-task:NAME          begin task NAME
          end-task:NAME            end the latest task begun as NAME (again if ended)
          block:SECONDS            block the main thread for SECONDS (0 = not at all) of real
                                   time, whatever the host's clock (what a watchdog sees)
          block:forever            block the main thread forever (asleep in pause(),
                                   no CPU); the callback never returns
          log-flood:MIB            write MIB (1-4096) MiB of x to stdout at once (the log's bounds)
          spin:SECONDS             keep the main thread running (never asleep: a slow app,
                                   not a blocked one) for SECONDS (0-600) of real time
          allocate:MIB             allocate and touch MIB (1-65536) MiB and keep it ("[ProbeApp] allocated
                                   N MiB"), then tell the host its footprint changed, so the host
                                   reads it now (memory pressure, jetsam)
          fork:N                   fork N (1-\(maximumProcessCount)) children that sleep in pause() for good:
                                   "[ProbeApp] forked K of N: PID,PID..." (plus " (ERRNO)" when a fork
                                   failed; under the host "[ProbeApp] forked 0 of N (EPERM)": apps
                                   make no process); nothing here reaps or kills them
          fork-limit:N             fork up to N (1-\(maximumProcessCount)) sleeping children, stopping at the
                                   first failure: "[ProbeApp] fork-limit: forked K of N" (plus " (ERRNO)"),
                                   then kill and reap them
          fork-allocate:MIB        fork a child that allocates and touches MIB MiB, then exits; the
                                   callback waits for it: "[ProbeApp] child PID allocating MIB MiB:
                                   exit N|SIGNAL" (or "[ProbeApp] fork-allocate: EPERM")
          spawn:PATH               posix_spawn PATH and wait for it: "[ProbeApp] spawn PATH: exit N|
                                   SIGNAL" or the errno ("[ProbeApp] spawn PATH: EPERM" under the host)
          threads:N                start up to N (1-\(maximumProcessCount)) threads, stopping at the first
                                   failure: "[ProbeApp] threads: started K of N" (plus " (ERRNO)"), then
                                   end and join them
          write-file:PATH:BYTES    write BYTES bytes to PATH in 1 MiB writes ("[ProbeApp] wrote N of
                                   BYTES to PATH" and the error that stopped it, e.g. EFBIG)
          wait-fifo:PATH           block the main thread until one byte can be read from
                                   the FIFO at PATH (a test holds a callback open with it)
          hang                     once this callback has returned, block the main
                                   thread forever (queued on the main queue): the run
                                   loop stays in one turn, and the host's hang check
                                   kills the app if it is active
          hang-fifo:PATH           once this callback has returned, block the main
                                   thread (queued on the main queue) until one byte can
                                   be read from the FIFO at PATH: opening PATH for
                                   writing returns once the main thread is blocked
          lock:PATH                flock(LOCK_EX|LOCK_NB) PATH, created if missing
                                   (mode 0644, parent must exist); the fd stays open
          posix-lock:PATH          fcntl(F_SETLK) write lock on all of PATH, created if
                                   missing; the fd stays open
          unlock:PATH              release every lock taken on PATH (same spelling)
                                   and close those fds
          time-remaining           print backgroundTimeRemaining
          window:TEXT              show a window (white, one label reading TEXT), or set
                                   the label to TEXT if it shows: "[ProbeApp] window: TEXT";
                                   what the host's app-switcher snapshots picture
          ignore-snapshot          ignoreSnapshotOnNextApplicationLaunch(): the host's
                                   snapshots show the launch image until the app is next
                                   active ("[ProbeApp] ignore-snapshot: ok")
          timer:NAME:SECONDS[:repeat]  schedule host timer NAME (HostTimer: the host's clock)
                                   SECONDS from now, every SECONDS with :repeat; SECONDS as
                                   written (nan, inf, -1 show the host's bounds):
                                   "[ProbeApp] timer NAME scheduled interval=I[ repeats]" or
                                   "[ProbeApp] timer NAME: refused: REASON"; each fire runs
                                   the timer trigger's actions
          invalidate-timer:NAME    invalidate it: "[ProbeApp] timer NAME invalidated"
          timers:N:SECONDS         schedule N (1-\(maximumTimerCount)) one-shot host timers SECONDS
                                   from now, stopping at the first refusal: "[ProbeApp] timers:
                                   scheduled K of N" (plus ": refused: REASON")
          timer-churn:N            schedule and invalidate N (1-\(maximumTimerCount)) host timers, one
                                   after the other: "[ProbeApp] timer-churn: N done"
          exit:CODE                exit at once with status CODE (0-255)
          crash                    crash (fatalError)
          garbage                  write a frame with a non-JSON payload to the socket
          oversized                write a frame header announcing 100 MiB
        sandbox probes, which say what the app's sandbox lets it do (each prints one line):
          socket:bluetooth         try socket(2) (AF_BLUETOOTH/SOCK_SEQPACKET, or
          socket:inet|unix         AF_INET/AF_UNIX SOCK_STREAM); prints
                                   "[ProbeApp] socket FAMILY: ok" or the errno name
                                   ("[ProbeApp] socket bluetooth: EPERM")
          open:PATH                try open(2) PATH O_RDWR (no create); prints
                                   "[ProbeApp] open PATH: ok" or the errno name
          hold-open:PATH           open PATH read-only and keep the descriptor (at most 64):
                                   "[ProbeApp] hold-open PATH: ok" or the errno name
          read-held:PATH           read from the descriptor hold-open kept (from offset 0):
                                   "[ProbeApp] read-held PATH: ok", the errno name, or "not held"
          read:PATH                open PATH read-only and read from it; prints
                                   "[ProbeApp] read PATH: ok" or the errno name
          write-protected:PATH[:complete|unless-open|until-first-unlock|none]  write "secret" to PATH
                                   with that data protection (default complete);
                                   "[ProbeApp] write-protected PATH: ok" or ": failed: REASON"
          protected-data           "[ProbeApp] protected data available|unavailable"
          write:PATH               open PATH for writing (O_APPEND, created if missing,
                                   nothing written); "[ProbeApp] write PATH: ok" or the errno name
          kill:PID[:SIGNAL]        kill(2) PID with SIGNAL (default 0: the permission
                                   check only); "[ProbeApp] kill PID: ok" or the errno name
          caps                     print "[ProbeApp] CapInh|CapPrm|CapEff|CapBnd|CapAmb HEX"
                                   from /proc/self/status
          group:ID                 print "[ProbeApp] group ID: PATH" (the App Group's
                                   container) or "[ProbeApp] group ID: none"
        A PATH of lock, posix-lock, unlock, open, read and write may start with
        group:ID/, meaning that App Group's container (e.g. lock:group:group.x/db).
        service ACTIONs print "[ProbeApp] ACTION: ok" or "[ProbeApp] ACTION: refused: REASON"
        (ACTION is the keyword, e.g. "location-start: ok"; other failures say "failed: ..."):
          audio-play:SECONDS       play SECONDS (0-\(Int(maximumToneSeconds))) of a 440 Hz tone at 8000 Hz, one call
          audio-stop               stop audio (AudioSession.setActive(false))
          location-auth:always|when-in-use  request that authorization; prints
                                   "[ProbeApp] location authorization STATUS"
          location-start           startUpdatingLocation
          location-stop            stopUpdatingLocation (a refusal only goes to stderr)
          location-background:on|off  allowsBackgroundLocationUpdates = true|false; true
                                   without the location mode gets the app killed
          significant-changes[:off]  start (stop) significant-change location updates
          monitor-region:ID:LAT:LON:RADIUS  startMonitoring(for:) a circular region (prints
                                   "ok"; a failure comes as "[ProbeApp] region failed ID CODE:
                                   REASON"); crossings print "[ProbeApp] region enter|exit ID"
                                   and run the region trigger's actions
          stop-region:ID           stopMonitoring(for:) the region ID
          regions                  prints "[ProbeApp] regions ID,ID..." (monitoredRegions,
                                   sorted; "none" when empty)
          voip-register            register for VoIP pushes; prints "[ProbeApp] voip token HEX"
          report-call              report an incoming call with a fresh UUID; prints
                                   "[ProbeApp] reporting call UUID" first
          end-call                 end the last reported call ("[ProbeApp] ending call UUID")
          ble-scan:any             scan for every peripheral, or only for those
          ble-scan:UUID[,UUID...]  advertising one of the service UUIDs
          ble-stop-scan            stop scanning (a refusal only goes to stderr)
          ble-connect:ID           connect to peripheral ID
          ble-advertise:UUID[,UUID...]  advertise these services (local name ProbeApp)
          ble-stop-advertise       stop advertising (a refusal only goes to stderr)
          accessory-list           "[ProbeApp] accessory-list: N accessories", then
                                   "[ProbeApp] accessory ID NAME PROTOCOLS" for each
          register-push            registerForRemoteNotifications; the delegate prints
                                   "[ProbeApp] push token HEX" or
                                   "[ProbeApp] push registration failed: REASON"
          fetch-interval:minimum|never|SECONDS  setMinimumBackgroundFetchInterval
          refresh-status           prints "[ProbeApp] refresh status available|denied|restricted"
                                   (a failure goes to stderr and reads denied)
          bg-register:ID           BGTaskScheduler.register(forTaskWithIdentifier: ID); "ok", or
                                   "refused: ..." when it returns false (the reason is on
                                   stderr); only before didFinishLaunching returns, so use
                                   --on launch
          bg-submit:refresh:ID[:SECONDS]  submit a BGAppRefreshTaskRequest, earliest SECONDS
                                   from now; a BGTaskScheduler error prints
                                   "[ProbeApp] bg-submit: failed: CODE REASON" (CODE
                                   unavailable, tooManyPendingTaskRequests, notPermitted)
          bg-submit:processing:ID[:SECONDS][:power][:network]  submit a
                                   BGProcessingTaskRequest (requiresExternalPower,
                                   requiresNetworkConnectivity)
          bg-cancel:ID|all         cancel one pending request, or all (a failure only
                                   goes to stderr)
          bg-pending               "[ProbeApp] bg-pending: N requests", then
                                   "[ProbeApp] bg-request refresh|processing ID[ earliest=SECONDS]
                                   [ power][ network]" for each (SECONDS from now, rounded)
          url-session:ID           make background URLSession ID (once; later: getAllTasks) and
                                   print "[ProbeApp] url-session ID: N tasks", then
                                   "[ProbeApp] url-task N download|upload STATE URL bytes=B" for each
          url-session:ID[:discretionary][:wifi-only][:no-launch-events]  the same; the session
                                   made here has isDiscretionary = true (waits for power and
                                   Wi-Fi), allowsCellularAccess = false (waits for Wi-Fi) and/or
                                   sessionSendsLaunchEvents = false (no background launch)
          download:ID:URL          start a download in session ID (made if needed):
                                   "[ProbeApp] download started task=N", or
                                   "[ProbeApp] download: failed: CODE: REASON" (also refused)
          downloads:ID:COUNT:URL   start COUNT (1-\(maximumDownloadCount)) downloads in session ID, of URL with
                                   every "{n}" replaced by 1...COUNT (one path per transfer); prints one
                                   line, "[ProbeApp] downloads started N" (N of COUNT resumed without
                                   error), plus " failed M: FIRST-ERROR" when some failed
          data-task:ID:URL         make a data task in background session ID: a programmer error,
                                   so it raises NSGenericException and aborts (prints
                                   "[ProbeApp] data task ID" first)
          upload:ID:URL:FILE       start an upload (POST) of FILE: "[ProbeApp] upload started task=N"
          cancel-task:ID:N         cancel task N of session ID: "[ProbeApp] cancelling task N"
          cancel-resume:ID:N       cancel task N with cancel(byProducingResumeData:); the data is
                                   saved to Documents/resume-N.plist: "[ProbeApp] resume data task=N
                                   saved PATH bytes=B", or "[ProbeApp] resume data task=N nil"
          download-resume:ID:FILE  downloadTask(withResumeData:) with FILE's contents (relative to
                                   the container; deleted once read): "[ProbeApp] download started
                                   task=N", or a complaint when FILE is missing
          url-tasks:ID             like url-session, with getAllTasks
        --ignore-expiration        expiration handlers only log; by default each
                                   task's handler ends its task
        --fetch-result PLAN        how performFetch's completion is called (default newData)
        --push-result PLAN         how a remote notification's completion is called
                                   (default newData); PLAN is one of
                                   newData|noData|failed   at once, with that result
                                   never                   not at all
                                   after:SECONDS:RESULT    after SECONDS (a host timer), with RESULT
        --bgtask complete|never|after:SECONDS  how a launched BGTask ends: at once
                                   (default), never, or after SECONDS (a host timer); always
                                   setTaskCompleted(success: true)
        --bgtask-expire complete|ignore  what its expiration handler does:
                                   setTaskCompleted(success: false) (default), or nothing
        --events-completion now|never|finish  what handleEventsForBackgroundURLSession does
                                   with its completion: call it at once (default), never, or
                                   in urlSessionDidFinishEvents

        A relative PATH is taken from the app's working directory (its container).
        A lock that is taken by someone else fails at once (it does not wait).

        examples:
          ProbeApp --on background hold-task:upload:10 --on active print:hello
          ProbeApp --on background begin-task:sync             handler ends it at expiration
          ProbeApp --ignore-expiration --on background hold-tasks:3:t
          ProbeApp --on launch block:forever                   never finishes launching
          ProbeApp --on background block:forever               never returns from didEnterBackground
          ProbeApp --on active hang                            active, then unresponsive
          ProbeApp --on background lock:/tmp/shared/db --on foreground unlock:/tmp/shared/db
          ProbeApp --on launch location-auth:always --on launch location-background:on \\
                   --on launch location-start --on location print:got-fix
          ProbeApp --on launch voip-register --on voip-push report-call --on background end-call
          ProbeApp --on launch ble-scan:180D --on ble-discovered print:found --on launch socket:bluetooth
          ProbeApp --on launch fetch-interval:minimum --fetch-result after:5:noData
          ProbeApp --on launch bg-register:com.x.refresh --on background bg-submit:refresh:com.x.refresh:60 \\
                   --bgtask never --bgtask-expire complete
          ProbeApp --on launch url-session:s --on launch 'downloads:s:10000:http://127.0.0.1:8080/f/{n}'
        """

    /// What the command line asks for.
    enum Command: Equatable {
        case help
        case run(Script)
    }

    /// The arguments kept in the app's bundle (`ProbeApp.args` beside Info.plist), then in
    /// its container, one per line (blank lines skipped).
    static func savedArguments(bundle: String?, home: String?) -> [String] {
        [bundle.map { $0 + "/ProbeApp.args" }, home.map { $0 + "/Library/Preferences/ProbeApp.args" }].compactMap { path in
            path.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }
        }.flatMap { $0.split(separator: "\n").map(String.init).filter { !$0.isEmpty } }
    }

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) throws(ScriptError) -> Command {
        var script = Script()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h":
                return .help
            case "--ignore-expiration":
                script.ignoreExpiration = true
            case "--fetch-result", "--push-result":
                guard let value = rest.popFirst() else { throw ScriptError("\(argument) needs a PLAN") }
                let plan = try completionPlan(value, for: argument)
                if argument == "--fetch-result" { script.fetchResult = plan } else { script.pushResult = plan }
            case "--bgtask":
                guard let value = rest.popFirst() else { throw ScriptError("--bgtask needs complete, never or after:SECONDS") }
                script.bgTask = try taskPlan(value)
            case "--bgtask-expire":
                guard let value = rest.popFirst(), let plan = ExpirePlan(rawValue: value) else {
                    throw ScriptError("--bgtask-expire needs complete or ignore")
                }
                script.bgTaskExpire = plan
            case "--events-completion":
                guard let value = rest.popFirst(), let plan = EventsCompletionPlan(rawValue: value) else {
                    throw ScriptError("--events-completion needs now, never or finish")
                }
                script.eventsCompletion = plan
            case "--on":
                guard let name = rest.popFirst(), let actionText = rest.popFirst() else {
                    throw ScriptError("--on needs TRIGGER and ACTION")
                }
                guard let trigger = Trigger(rawValue: name) else {
                    throw ScriptError("unknown trigger \"\(name)\" (one of: \(Trigger.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                script.actions[trigger, default: []].append(try parseAction(actionText))
            default:
                throw ScriptError("unknown argument \"\(argument)\"")
            }
        }
        return .run(script)
    }

    /// Parses one ACTION.
    static func parseAction(_ text: String) throws(ScriptError) -> Action {
        let keyword = text.prefix { $0 != ":" }
        let argument = text.count > keyword.count ? String(text.dropFirst(keyword.count + 1)) : nil
        switch (keyword, argument) {
        case ("print", let text?):
            return .print(text)
        case ("hold-task", let argument?):
            guard let colon = argument.lastIndex(of: ":"), colon != argument.startIndex else {
                throw ScriptError("hold-task needs NAME:SECONDS, got \"\(text)\"")
            }
            return .holdTask(name: String(argument[..<colon]),
                             seconds: try seconds(String(argument[argument.index(after: colon)...]), in: text))
        case ("hold-tasks", let argument?):
            guard let colon = argument.firstIndex(of: ":"),
                  let count = Int(argument[..<colon]), (1...maximumTaskCount).contains(count),
                  argument.index(after: colon) != argument.endIndex
            else {
                throw ScriptError("hold-tasks needs N:PREFIX with N 1-\(maximumTaskCount) and a PREFIX, got \"\(text)\"")
            }
            return .holdTasks(count: count, prefix: String(argument[argument.index(after: colon)...]))
        case ("begin-task", let name?) where !name.isEmpty:
            return .beginTask(name: name)
        case ("end-task", let name?) where !name.isEmpty:
            return .endTask(name: name)
        case ("block", "forever"):
            return .blockForever
        case ("block", let value?):
            guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else {
                throw ScriptError("block needs SECONDS or forever, got \"\(text)\"")
            }
            return .block(seconds: seconds)
        case ("log-flood", let value?):
            guard let n = Int(value), (1...4096).contains(n) else {
                throw ScriptError("log-flood needs MiB (1-4096), got \"\(text)\"")
            }
            return .logFlood(mebibytes: n)
        case ("spin", let value?):
            guard let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= 600 else {
                throw ScriptError("spin needs SECONDS from 0 to 600, got \"\(text)\"")
            }
            return .spin(seconds: seconds)
        case ("hang", nil):
            return .hang
        case ("hang-fifo", let path?) where !path.isEmpty:
            return .hangFIFO(path: path)
        case ("wait-fifo", let path?) where !path.isEmpty:
            return .waitFIFO(path: path)
        case ("allocate", let value?):
            guard let n = Int(value), (1...65536).contains(n) else {
                throw ScriptError("allocate needs MiB (1-65536), got \"\(text)\"")
            }
            return .allocate(mebibytes: n)
        case ("fork", let value?), ("fork-limit", let value?), ("threads", let value?):
            guard let n = Int(value), (1...maximumProcessCount).contains(n) else {
                throw ScriptError("\(keyword) needs N (1-\(maximumProcessCount)), got \"\(text)\"")
            }
            switch keyword {
            case "fork": return .fork(count: n)
            case "fork-limit": return .forkLimit(count: n)
            default: return .threads(count: n)
            }
        case ("fork-allocate", let value?):
            guard let n = Int(value), (1...65536).contains(n) else {
                throw ScriptError("fork-allocate needs MiB (1-65536), got \"\(text)\"")
            }
            return .forkAllocate(mebibytes: n)
        case ("spawn", let path?) where !path.isEmpty:
            return .spawn(path: path)
        case ("write-file", let argument?):
            guard let colon = argument.lastIndex(of: ":"), colon != argument.startIndex,
                  let bytes = Int64(argument[argument.index(after: colon)...]), bytes >= 0 else {
                throw ScriptError("write-file needs PATH:BYTES, got \"\(text)\"")
            }
            return .writeFile(path: String(argument[..<colon]), bytes: bytes)
        case ("lock", let path?) where !path.isEmpty:
            return .lock(path: path)
        case ("posix-lock", let path?) where !path.isEmpty:
            return .posixLock(path: path)
        case ("unlock", let path?) where !path.isEmpty:
            return .unlock(path: path)
        case ("exit", let value?):
            guard let code = Int32(value), (0...255).contains(code) else {
                throw ScriptError("exit needs a status 0-255, got \"\(text)\"")
            }
            return .exit(code: code)
        case ("crash", nil): return .crash
        case ("garbage", nil): return .garbage
        case ("oversized", nil): return .oversized
        case ("time-remaining", nil): return .timeRemaining
        case ("window", let text?): return .window(text: text)
        case ("ignore-snapshot", nil): return .ignoreSnapshot
        case ("timer", let argument?):
            var parts = argument.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            let repeats = parts.count >= 3 && parts.last == "repeat"
            if repeats { parts.removeLast() }
            guard parts.count >= 2, let seconds = Double(parts.removeLast()), !parts.joined(separator: ":").isEmpty else {
                throw ScriptError("timer needs NAME:SECONDS[:repeat], got \"\(text)\"")
            }
            return .timer(name: parts.joined(separator: ":"), seconds: seconds, repeats: repeats)
        case ("invalidate-timer", let name?) where !name.isEmpty:
            return .invalidateTimer(name: name)
        case ("timers", let argument?):
            guard let colon = argument.firstIndex(of: ":"),
                  let count = Int(argument[..<colon]), (1...maximumTimerCount).contains(count) else {
                throw ScriptError("timers needs N:SECONDS with N 1-\(maximumTimerCount), got \"\(text)\"")
            }
            return .timers(count: count, seconds: try seconds(String(argument[argument.index(after: colon)...]), in: text))
        case ("timer-churn", let value?):
            guard let count = Int(value), (1...maximumTimerCount).contains(count) else {
                throw ScriptError("timer-churn needs N (1-\(maximumTimerCount)), got \"\(text)\"")
            }
            return .timerChurn(count: count)
        case ("audio-play", let value?):
            guard let seconds = Double(value), seconds.isFinite, (0...maximumToneSeconds).contains(seconds) else {
                throw ScriptError("audio-play needs SECONDS 0-\(Int(maximumToneSeconds)), got \"\(text)\"")
            }
            return .audioPlay(seconds: seconds)
        case ("audio-stop", nil): return .audioStop
        case ("location-auth", "always"): return .locationAuth(always: true)
        case ("location-auth", "when-in-use"): return .locationAuth(always: false)
        case ("location-start", nil): return .locationStart
        case ("location-stop", nil): return .locationStop
        case ("location-background", "on"): return .locationBackground(true)
        case ("location-background", "off"): return .locationBackground(false)
        case ("significant-changes", nil): return .significantChanges(true)
        case ("significant-changes", "off"): return .significantChanges(false)
        case ("monitor-region", let argument?):
            // ID may hold colons: the last three fields are the numbers.
            var parts = argument.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 4, let radius = Double(parts.removeLast()), let lon = Double(parts.removeLast()),
                  let lat = Double(parts.removeLast()) else {
                throw ScriptError("monitor-region needs ID:LAT:LON:RADIUS, got \"\(text)\"")
            }
            return .monitorRegion(CircularRegion(identifier: parts.joined(separator: ":"), latitude: lat, longitude: lon, radius: radius))
        case ("stop-region", let id?): return .stopRegion(identifier: id)
        case ("regions", nil): return .regions
        case ("voip-register", nil): return .voipRegister
        case ("report-call", nil): return .reportCall
        case ("end-call", nil): return .endCall
        case ("ble-scan", "any"): return .bleScan(services: nil)
        case ("ble-scan", let list?):
            return .bleScan(services: try uuids(list, in: text))
        case ("ble-stop-scan", nil): return .bleStopScan
        case ("ble-connect", let id?) where !id.isEmpty: return .bleConnect(id: id)
        case ("ble-advertise", let list?):
            return .bleAdvertise(services: try uuids(list, in: text))
        case ("ble-stop-advertise", nil): return .bleStopAdvertise
        case ("accessory-list", nil): return .accessoryList
        case ("register-push", nil): return .registerPush
        case ("socket", let name?):
            guard let family = SocketFamily(rawValue: name) else {
                throw ScriptError("socket needs one of \(SocketFamily.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(text)\"")
            }
            return .socket(family)
        case ("open", let path?) where !path.isEmpty: return .open(path: path)
        case ("read", let path?) where !path.isEmpty: return .read(path: path)
        case ("hold-open", let path?) where !path.isEmpty: return .holdOpen(path: path)
        case ("read-held", let path?) where !path.isEmpty: return .readHeld(path: path)
        case ("write", let path?) where !path.isEmpty: return .write(path: path)
        case ("write-protected", let argument?) where !argument.isEmpty:
            let classes: [String: FileProtectionClass] = ["complete": .complete, "unless-open": .completeUnlessOpen,
                                                          "until-first-unlock": .completeUntilFirstUserAuthentication, "none": FileProtectionClass.none]
            if let colon = argument.lastIndex(of: ":"), let protection = classes[String(argument[argument.index(after: colon)...])],
               colon != argument.startIndex {
                return .writeProtected(path: String(argument[..<colon]), protection: protection)
            }
            return .writeProtected(path: argument, protection: .complete)
        case ("protected-data", nil): return .protectedData
        case ("kill", let target?):
            let parts = target.split(separator: ":", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let pid = Int32(parts[0]), pid > 0,
                  let signal = parts.count == 2 ? Int32(parts[1]) : 0, (0...64).contains(signal) else {
                throw ScriptError("kill needs PID[:SIGNAL] (a pid above 0, a signal 0-64), got \"\(text)\"")
            }
            return .kill(pid: pid, signal: signal)
        case ("caps", nil): return .capabilities
        case ("group", let id?) where !id.isEmpty: return .group(identifier: id)
        case ("fetch-interval", "minimum"): return .fetchInterval(.minimum)
        case ("fetch-interval", "never"): return .fetchInterval(.never)
        case ("fetch-interval", let value?):
            return .fetchInterval(.seconds(try seconds(value, in: text)))
        case ("refresh-status", nil): return .refreshStatus
        case ("bg-register", let id?) where !id.isEmpty: return .bgRegister(identifier: id)
        case ("bg-submit", let argument?):
            return try bgSubmit(argument, in: text)
        case ("bg-cancel", "all"): return .bgCancel(identifier: nil)
        case ("bg-cancel", let id?) where !id.isEmpty: return .bgCancel(identifier: id)
        case ("bg-pending", nil): return .bgPending
        case ("url-session", let argument?) where !argument.isEmpty:
            return try urlSession(argument, in: text)
        case ("url-tasks", let id?) where !id.isEmpty: return .urlTasks(session: id)
        case ("download", let argument?):
            guard let colon = argument.firstIndex(of: ":"), colon != argument.startIndex,
                  argument.index(after: colon) != argument.endIndex else {
                throw ScriptError("download needs ID:URL, got \"\(text)\"")
            }
            return .download(session: String(argument[..<colon]), url: String(argument[argument.index(after: colon)...]))
        case ("data-task", let argument?):
            guard let colon = argument.firstIndex(of: ":"), colon != argument.startIndex,
                  argument.index(after: colon) != argument.endIndex else {
                throw ScriptError("data-task needs ID:URL, got \"\(text)\"")
            }
            return .dataTask(session: String(argument[..<colon]), url: String(argument[argument.index(after: colon)...]))
        case ("downloads", let argument?):
            let parts = argument.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, !parts[0].isEmpty, let count = Int(parts[1]), (1...maximumDownloadCount).contains(count),
                  !parts[2].isEmpty else {
                throw ScriptError("downloads needs ID:COUNT:URL with COUNT 1-\(maximumDownloadCount), got \"\(text)\"")
            }
            return .downloads(session: parts[0], count: count, url: parts[2])
        case ("upload", let argument?):
            guard let first = argument.firstIndex(of: ":"), first != argument.startIndex,
                  let last = argument.lastIndex(of: ":"), last > argument.index(after: first),
                  argument.index(after: last) != argument.endIndex else {
                throw ScriptError("upload needs ID:URL:FILE, got \"\(text)\"")
            }
            return .upload(session: String(argument[..<first]), url: String(argument[argument.index(after: first)..<last]),
                           file: String(argument[argument.index(after: last)...]))
        case ("cancel-resume", let argument?):
            guard let colon = argument.lastIndex(of: ":"), colon != argument.startIndex,
                  let task = Int(argument[argument.index(after: colon)...]) else {
                throw ScriptError("cancel-resume needs ID:N, got \"\(text)\"")
            }
            return .cancelResume(session: String(argument[..<colon]), task: task)
        case ("download-resume", let argument?):
            guard let colon = argument.firstIndex(of: ":"), colon != argument.startIndex,
                  argument.index(after: colon) != argument.endIndex else {
                throw ScriptError("download-resume needs ID:FILE, got \"\(text)\"")
            }
            return .downloadResume(session: String(argument[..<colon]), file: String(argument[argument.index(after: colon)...]))
        case ("cancel-task", let argument?):
            guard let colon = argument.lastIndex(of: ":"), colon != argument.startIndex,
                  let task = Int(argument[argument.index(after: colon)...]) else {
                throw ScriptError("cancel-task needs ID:N, got \"\(text)\"")
            }
            return .cancelTask(session: String(argument[..<colon]), task: task)
        default:
            throw ScriptError("unknown or malformed action \"\(text)\"")
        }
    }

    /// A comma-separated list of service UUIDs, none empty.
    private static func uuids(_ list: String, in text: String) throws(ScriptError) -> [String] {
        let items = list.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !items.isEmpty, !items.contains(where: \.isEmpty) else {
            throw ScriptError("expected UUID[,UUID...] in \"\(text)\"")
        }
        return items
    }

    /// `ID[:discretionary][:wifi-only][:no-launch-events]`.
    private static func urlSession(_ argument: String, in text: String) throws(ScriptError) -> Action {
        let parts = argument.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let grammar = "ID[:discretionary][:wifi-only][:no-launch-events]"
        guard !parts[0].isEmpty else { throw ScriptError("url-session needs \(grammar), got \"\(text)\"") }
        var discretionary = false, wifiOnly = false, noLaunchEvents = false
        for flag in parts.dropFirst() {
            switch flag {
            case "discretionary" where !discretionary: discretionary = true
            case "wifi-only" where !wifiOnly: wifiOnly = true
            case "no-launch-events" where !noLaunchEvents: noLaunchEvents = true
            default: throw ScriptError("unexpected \"\(flag)\" in \"\(text)\" (url-session takes \(grammar))")
            }
        }
        return .urlSession(id: parts[0], discretionary: discretionary, wifiOnly: wifiOnly, noLaunchEvents: noLaunchEvents)
    }

    /// `refresh:ID[:SECONDS]` or `processing:ID[:SECONDS][:power][:network]`.
    private static func bgSubmit(_ argument: String, in text: String) throws(ScriptError) -> Action {
        let parts = argument.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, let kind = TaskKind(rawValue: parts[0]), !parts[1].isEmpty else {
            throw ScriptError("bg-submit needs refresh:ID[:SECONDS] or processing:ID[:SECONDS][:power][:network], got \"\(text)\"")
        }
        var rest = parts.dropFirst(2)
        var delay: Double?
        if let first = rest.first, first != "power", first != "network" {
            delay = try seconds(first, in: text)
            rest = rest.dropFirst()
        }
        var power = false, network = false
        for flag in rest {
            switch (kind, flag) {
            case (.processing, "power") where !power: power = true
            case (.processing, "network") where !network: network = true
            default:
                throw ScriptError("unexpected \"\(flag)\" in \"\(text)\" (\(kind == .refresh ? "refresh takes ID[:SECONDS]" : "processing takes ID[:SECONDS][:power][:network]"))")
            }
        }
        return .bgSubmit(kind: kind, identifier: parts[1], seconds: delay, power: power, network: network)
    }

    /// `newData|noData|failed|never|after:SECONDS:RESULT`.
    static func completionPlan(_ value: String, for option: String) throws(ScriptError) -> CompletionPlan {
        if value == "never" { return .never }
        if let result = FetchResult(rawValue: value) { return .now(result) }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        if parts.count == 3, parts[0] == "after", let result = FetchResult(rawValue: parts[2]) {
            return .after(seconds: try seconds(parts[1], in: value), result)
        }
        throw ScriptError("\(option) needs newData, noData, failed, never or after:SECONDS:RESULT, got \"\(value)\"")
    }

    /// `complete|never|after:SECONDS`.
    static func taskPlan(_ value: String) throws(ScriptError) -> TaskPlan {
        switch value {
        case "complete": return .complete
        case "never": return .never
        default:
            guard value.hasPrefix("after:") else {
                throw ScriptError("--bgtask needs complete, never or after:SECONDS, got \"\(value)\"")
            }
            return .after(seconds: try seconds(String(value.dropFirst("after:".count)), in: value))
        }
    }

    private static func seconds(_ value: String, in text: String) throws(ScriptError) -> Double {
        guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else {
            throw ScriptError("expected a number of seconds in \"\(text)\"")
        }
        return seconds
    }
}

/// A command line the grammar does not accept.
struct ScriptError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
