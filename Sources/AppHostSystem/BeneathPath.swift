import CAppHostSys
import SystemPackage

/// Opening a path below a folder without following any symbolic link: for a process
/// with more rights than the owner of the folders it works in (the transfer daemon, as
/// root, in the apps' containers), where a link the owner planted must not lead it
/// anywhere else.
public enum BeneathPath {
    /// `O_PATH` (a descriptor that only names a file or folder, for the `*at` calls),
    /// which Swift's Glibc module does not export.
    public static let pathOnly: Int32 = 0o10000000

    /// Opens `path` (relative: no leading "/", no "." or ".." component) below the folder
    /// `dirfd`, each folder on the way and the last component without following a link
    /// (`O_NOFOLLOW`; `O_CLOEXEC` is added). A link in the way fails with `ELOOP` or
    /// `ENOTDIR`; a path that is absolute or empty with `EINVAL`, one that climbs with `EACCES`.
    public static func open(_ path: String, below dirfd: Int32, flags: Int32, mode: mode_t = 0) -> Result<Int32, Errno> {
        var fd: Int32 = -1
        let rc = aph_open_beneath(dirfd, path, flags, UInt32(mode), &fd)
        return rc == 0 ? .success(fd) : .failure(Errno(rawValue: rc))
    }
}
