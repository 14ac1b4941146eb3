import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

extension Errno {
    /// The symbolic name of this errno ("ENOENT"), or nil for an unusual value.
    public var symbolicName: String? { errnoSymbolicName(rawValue) }

    /// "No such file or directory (ENOENT)": strerror text plus the name.
    var explained: String {
        if let name = symbolicName { return "\(description) (\(name))" }
        return "\(description) (errno \(rawValue))"
    }
}

// Outside the extension: Errno has members named EPERM etc. that would shadow Glibc's.
private func errnoSymbolicName(_ value: Int32) -> String? {
        switch value {
        case EPERM: "EPERM"
        case ENOENT: "ENOENT"
        case ESRCH: "ESRCH"
        case EINTR: "EINTR"
        case EIO: "EIO"
        case ENXIO: "ENXIO"
        case E2BIG: "E2BIG"
        case ENOEXEC: "ENOEXEC"
        case EBADF: "EBADF"
        case ECHILD: "ECHILD"
        case EAGAIN: "EAGAIN"
        case ENOMEM: "ENOMEM"
        case EACCES: "EACCES"
        case EFAULT: "EFAULT"
        case EBUSY: "EBUSY"
        case EEXIST: "EEXIST"
        case ENODEV: "ENODEV"
        case ENOTDIR: "ENOTDIR"
        case EISDIR: "EISDIR"
        case EINVAL: "EINVAL"
        case ENFILE: "ENFILE"
        case EMFILE: "EMFILE"
        case ETXTBSY: "ETXTBSY"
        case EFBIG: "EFBIG"
        case ENOSPC: "ENOSPC"
        case EROFS: "EROFS"
        case EPIPE: "EPIPE"
        case ERANGE: "ERANGE"
        case ENAMETOOLONG: "ENAMETOOLONG"
        case ENOSYS: "ENOSYS"
        case ELOOP: "ELOOP"
        case EOPNOTSUPP: "EOPNOTSUPP"
        case ENOTSOCK: "ENOTSOCK"
        case ECONNREFUSED: "ECONNREFUSED"
        case ETIMEDOUT: "ETIMEDOUT"
        default: nil
        }
}
