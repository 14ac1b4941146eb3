import CAppHostSys
import SystemPackage

/// A connected AF_UNIX SOCK_STREAM pair, both ends close-on-exec. Give one end
/// to `SpawnSettings.ipcDescriptor` (the child gets it as fd 3, without
/// CLOEXEC), keep the other, and close the child's end after the spawn.
public func makeSocketPair() throws(Errno) -> (FileDescriptor, FileDescriptor) {
    var a: Int32 = -1, b: Int32 = -1
    let rc = aph_socketpair(&a, &b)
    if rc != 0 { throw Errno(rawValue: rc) }
    return (FileDescriptor(rawValue: a), FileDescriptor(rawValue: b))
}

/// A pipe, both ends close-on-exec (e.g. to capture a child's stdout: pass
/// `write` as `standardOutput`, close it after the spawn, read `read`).
public func makePipe() throws(Errno) -> (read: FileDescriptor, write: FileDescriptor) {
    var r: Int32 = -1, w: Int32 = -1
    let rc = aph_pipe(&r, &w)
    if rc != 0 { throw Errno(rawValue: rc) }
    return (FileDescriptor(rawValue: r), FileDescriptor(rawValue: w))
}
