// aph_sys.h — the C shim under AppHostSystem.
//
// Every function is prefixed `aph_`, returns 0 or an errno value, and takes one
// settings struct where it has many inputs. Variadic functions (prctl, syscall)
// and function-like macros (SCMP_ACT_ERRNO, W*) stay in C; Swift sees plain
// functions and structs.
#ifndef APH_SYS_H
#define APH_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - Seccomp (compiled in the parent, loaded by the child)

/// A compiled classic-BPF seccomp program: `length` instructions of 8 bytes
/// (`struct sock_filter`) at `instructions`. Owned by whoever called
/// `aph_seccomp_compile`; free it with `aph_bpf_program_free`.
struct aph_bpf_program {
    void *instructions;
    unsigned short length;
};

/// What `aph_seccomp_compile` puts in the filter. The default action is
/// "allow"; denied calls fail with `deny_errno` (EPERM when 0).
struct aph_seccomp_settings {
    /// Deny the baseline list (`aph_seccomp_baseline_names`), and by argument
    /// prlimit64 of a pid other than 0 and setpriority of a who other than 0
    /// or a which other than PRIO_PROCESS (another process's limits and nice
    /// value).
    int include_baseline;
    /// Deny clone3 with ENOSYS (glibc then falls back to clone) and clone with
    /// any CLONE_NEW* flag with `deny_errno`. Threads keep working (and fork,
    /// unless `deny_process_creation`).
    int deny_namespace_clone;
    /// More syscall numbers to deny (resolve names with `aph_seccomp_resolve`).
    const int *extra_denied;
    size_t extra_denied_count;
    /// Address families (AF_*) whose socket(2) and socketpair(2) fail with
    /// `deny_errno` (argument 0 compared on its low 32 bits, as the kernel
    /// reads an int). When any is given, io_uring_setup is denied too:
    /// IORING_OP_SOCKET creates sockets without the socket syscall.
    const int *denied_socket_families;
    size_t denied_socket_family_count;
    /// errno returned by denied calls; 0 means EPERM.
    int deny_errno;
    /// Deny socket(AF_UNIX, ...) (no way to connect to a Unix socket by path
    /// or abstract name) and socketpair(AF_UNIX) of datagram kinds; stream and
    /// seqpacket pairs stay allowed. Denies io_uring_setup too.
    int deny_unix_socket_creation;
    /// Deny making processes, as iOS's sandbox does: fork and vfork (where the
    /// architecture has them) and clone without CLONE_THREAD fail with
    /// `deny_errno`; clone3 fails with ENOSYS, so glibc's pthread_create falls
    /// back to clone with CLONE_THREAD, which stays allowed. posix_spawn and
    /// system(3) fail too (glibc spawns with clone3, then clone(CLONE_VFORK)).
    int deny_process_creation;
};

/// The names of the syscalls the baseline denies; `*count_out` gets the count.
const char *const *aph_seccomp_baseline_names(size_t *count_out);

/// Resolves a syscall name for the native architecture. ENOENT if unknown.
int aph_seccomp_resolve(const char *name, int *number_out);

/// Builds the filter with libseccomp and exports it to BPF (through a memfd).
/// Call in the parent; the child only loads the result.
int aph_seccomp_compile(const struct aph_seccomp_settings *settings,
                        struct aph_bpf_program *program_out);

/// Frees a program from `aph_seccomp_compile` (NULL-safe, idempotent).
void aph_bpf_program_free(struct aph_bpf_program *program);

// MARK: - Spawn

/// The descriptor number the IPC socket gets in the child.
#define APH_IPC_FD 3
/// The descriptor number the run-loop stamp page (a memfd) gets in the child.
#define APH_STAMP_FD 4

/// Which step failed (`aph_spawn_result.step`). PARENT_* happen in the caller,
/// the others in the child before execve.
#define APH_STEP_NONE 0
#define APH_STEP_INVALID 1          // bad settings (NULL path/argv)
#define APH_STEP_PIPE 2             // parent: creating the error pipe
#define APH_STEP_CLONE 3            // parent: clone, or mapping its stack
#define APH_STEP_PIDFD_OPEN 4       // parent: pidfd_open after the clone fallback
#define APH_STEP_REPORT 5           // parent: reading the error pipe
#define APH_STEP_SIGNALS 6          // child: resetting signal mask
#define APH_STEP_SETSID 7           // child: setsid
#define APH_STEP_DEATH_SIGNAL 8     // child: PR_SET_PDEATHSIG
#define APH_STEP_PARENT_EXITED 9    // child: parent died before PDEATHSIG was set
#define APH_STEP_NO_NEW_PRIVS 10    // child: PR_SET_NO_NEW_PRIVS
#define APH_STEP_DEV_NULL 11        // child: opening /dev/null
#define APH_STEP_DUP 12             // child: installing fd `detail` (0..3)
#define APH_STEP_CLOSE_FDS 13       // child: closing other descriptors
#define APH_STEP_CHDIR 14           // child: chdir(working_directory)
#define APH_STEP_RLIMIT 15          // child: setrlimit(rlimits[detail])
#define APH_STEP_SECCOMP 16         // child: loading the seccomp program
#define APH_STEP_EXEC 17            // child: execve(path)
#define APH_STEP_LANDLOCK 18        // child: landlock_restrict_self
#define APH_STEP_CAPABILITIES 19    // child: dropping capabilities (`detail`: 0 securebits, 1 bounding set, 2 ambient, 3 capset)
#define APH_STEP_CGROUP 20          // child: joining cgroup_procs_files[detail]
#define APH_STEP_IDENTITY 21        // child: taking its identity (`detail`: 0 setgroups, 1 setresgid, 2 setresuid)
#define APH_STEP_LOCKDOWN 22        // parent: making the lockdown filter; child: loading it
#define APH_STEP_NAMESPACES 23      // child: its namespaces (`detail`: APH_NS_STAGE_*)

/// One resource limit to set in the child (`RLIMIT_*`, soft, hard;
/// UINT64_MAX means infinity).
struct aph_rlimit {
    int resource;
    uint64_t soft;
    uint64_t hard;
};

/// Everything `aph_spawn` needs. Strings and arrays are prepared by the caller
/// and only read.
struct aph_spawn_settings {
    /// Executable for execve (used as given; no PATH search).
    const char *path;
    /// NULL-terminated argv (argv[0] included).
    char *const *argv;
    /// NULL-terminated environment ("KEY=VALUE").
    char *const *envp;
    /// chdir target in the child; NULL keeps the caller's.
    const char *working_directory;
    /// Parent descriptors for the child's 0, 1, 2; -1 means /dev/null.
    int stdin_fd;
    int stdout_fd;
    int stderr_fd;
    /// Parent descriptor installed as APH_IPC_FD (3) in the child; -1: none.
    int ipc_fd;
    /// Parent descriptor installed as APH_STAMP_FD (4) in the child (the
    /// run-loop stamp page); -1: none. Set it to -1 in a zeroed struct.
    int stamp_fd;
    /// Resource limits set in the child (may be NULL when count is 0).
    const struct aph_rlimit *rlimits;
    size_t rlimit_count;
    /// Seccomp program loaded last before execve; NULL for none.
    const struct aph_bpf_program *seccomp;
    /// Landlock ruleset (from `aph_landlock_create_ruleset`) the child
    /// enforces on itself right after PR_SET_NO_NEW_PRIVS, before its
    /// descriptors are installed; -1 for none. Only read: the caller keeps
    /// it, and the child's copy is closed before execve.
    int landlock_ruleset_fd;
    /// PR_SET_PDEATHSIG signal (e.g. SIGKILL); 0 for none. It fires when the
    /// *thread* that calls aph_spawn exits: call it from a long-lived thread.
    int death_signal;
    /// Non-zero: the child drops every capability before execve (after
    /// chdir and rlimits, before seccomp). With CAP_SETPCAP it first locks
    /// the securebits (no root privilege on exec, no ambient raise) and
    /// empties the bounding set; then it clears the ambient set and sets
    /// permitted, effective and inheritable to nothing (capset).
    int drop_capabilities;
    /// `cgroup.procs` files (one per cgroup hierarchy) the child writes its
    /// own pid to, first thing after setsid: it runs its whole life, every
    /// process it forks included, under its cgroups' limits. NULL when
    /// count is 0.
    const char *const *cgroup_procs_files;
    size_t cgroup_procs_file_count;
    /// The identity the child takes before execve (after chdir and rlimits,
    /// with the capability drop) when `set_identity` is non-zero: the
    /// supplementary groups become `groups` (`group_count` of them, may be 0),
    /// then the real, effective and saved gid `gid`, then the three uids
    /// `uid`. Needs CAP_SETGID / CAP_SETUID (a host running as root). Zero
    /// (as in a zeroed struct) keeps the caller's.
    int set_identity;
    uint32_t uid;
    uint32_t gid;
    const uint32_t *groups;
    size_t group_count;
    /// Non-zero: the child's umask becomes `umask`. Zero keeps the caller's.
    int set_umask;
    uint32_t umask;
    /// With `drop_capabilities`: capabilities (bit n = capability n, n < 64)
    /// kept through execve as ambient capabilities, e.g. CAP_DAC_OVERRIDE for
    /// a trusted helper that must reach files of apps running as other uids.
    /// Everything else is dropped as usual. 0: keep none.
    uint64_t kept_capabilities;
    /// Non-zero (apps, with a seccomp program): a second filter, made per
    /// child, holds it to itself after its launch. `execve` is allowed only
    /// with the exact path and argv pointers of the launch itself, which are
    /// copies at random page addresses of the host (some 88 bits to guess,
    /// none of them readable by the app), and `execveat` never: no code the
    /// app wrote or fetched (a memfd, a file in its container, /usr/bin/*)
    /// runs after the launch, as iOS code signing forbids. And
    /// `sched_setscheduler`, `sched_setparam`, `sched_setaffinity`,
    /// `sched_setattr` and `pidfd_open` take only its own pid (or 0),
    /// `ioprio_set` only `IOPRIO_WHO_PROCESS` of itself: another process's
    /// scheduling, CPUs and I/O priority (the host's, another app's) are out
    /// of reach whatever their uid.
    int app_lockdown;
    /// Non-zero: the child is cloned into new user, mount, pid and IPC
    /// namespaces (an unprivileged host's isolation, see `aph_namespaces`).
    /// It is pid 1 of its pid namespace (the host and every other process
    /// are out of its sight and reach); its user namespace maps
    /// `namespaces->uid`/`gid` (the host's own ids) to themselves (those two
    /// with `isolate_user` only); its mount
    /// namespace has every mount read-only and nosuid, the folder `hidden`
    /// under an empty read-only tmpfs but for `writable` (read-write, noexec,
    /// nosuid, nodev, at their own paths). `set_identity` only without
    /// `isolate_user`. NULL: none.
    const struct aph_namespaces *namespaces;
};

/// The namespaces of an app of an unprivileged host (`aph_spawn_settings.namespaces`).
struct aph_namespaces {
    /// Non-zero: new user and pid namespaces too (a host run by a user, whose
    /// apps share its uid). Zero: mount and IPC namespaces only, for a root
    /// host whose apps have uids of their own (it has the privilege to mount,
    /// and `set_identity` may go with it).
    int isolate_user;
    /// The host's effective uid and gid, mapped to themselves in the app's
    /// user namespace (its only ids there); with isolate_user.
    uint32_t uid;
    uint32_t gid;
    /// An absolute, canonical folder (the state directory) put out of sight
    /// under an empty tmpfs, read-only.
    const char *hidden;
    /// Absolute, canonical folders beneath `hidden` kept read-write (and
    /// noexec, nosuid, nodev) at their own paths; at most
    /// APH_NAMESPACES_MAX_WRITABLE.
    const char *const *writable;
    size_t writable_count;
    /// The folders to make in the tmpfs, parents first, so that every
    /// `writable` path exists there (e.g. hidden/containers,
    /// hidden/containers/ID); at most APH_NAMESPACES_MAX_WRITABLE * 4.
    const char *const *directories;
    size_t directory_count;
    /// Absolute paths of files beneath `writable` to cover, once the folders
    /// are in place, with an empty, mode-000, read-only file (source
    /// APH_PROTECTED_SOURCE): a locked device's protected files, out of the
    /// app's reach from its first instruction. A path gone since is skipped.
    /// At most APH_NAMESPACES_MAX_COVERED.
    const char *const *covered;
    size_t covered_count;
};

/// Most `writable` folders of `aph_namespaces` (a container and its App Groups).
#define APH_NAMESPACES_MAX_WRITABLE 64
/// Most files covered in one app's mount namespace (each cover is a mount).
#define APH_NAMESPACES_MAX_COVERED 4096
/// The mount source of a cover, as /proc/PID/mountinfo shows it.
#define APH_PROTECTED_SOURCE "apphost-protected"

/// Covers and uncovers files in the mount namespace of the process `pidfd`
/// names (an app of an unprivileged host, whose user namespace this process
/// owns): a forked, single-threaded helper joins its user and mount
/// namespaces (setns), covers each of `cover` as `aph_namespaces.covered`
/// does and detaches the mount on each of `uncover` (umount2, MNT_DETACH).
/// `results` (cover_count + uncover_count) gets 0 or a positive errno per
/// path, in that order. Returns 0, or a positive errno when the helper could
/// not be made or could not join the namespaces (then no result is set).
int aph_namespace_cover(int pidfd, const char *const *cover, size_t cover_count,
                        const char *const *uncover, size_t uncover_count, int *results);

/// Whether this kernel and its policy let this process give a child the
/// namespaces of `aph_spawn_settings.namespaces`, tried for real in a child
/// that exits at once: 0 when they do, else the errno of the failed step with
/// `*stage_out` saying which (APH_NS_STAGE_*).
int aph_namespaces_probe(const struct aph_namespaces *namespaces, int *stage_out);

#define APH_NS_STAGE_CLONE 0         // clone(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC)
#define APH_NS_STAGE_SETGROUPS 1     // writing /proc/self/setgroups
#define APH_NS_STAGE_UID_MAP 2       // writing /proc/self/uid_map
#define APH_NS_STAGE_GID_MAP 3       // writing /proc/self/gid_map
#define APH_NS_STAGE_PRIVATE 4       // making every mount private
#define APH_NS_STAGE_OPEN_TREE 5     // open_tree(OPEN_TREE_CLONE) of a writable folder
#define APH_NS_STAGE_WRITABLE_ATTR 6 // noexec, nosuid, nodev on it
#define APH_NS_STAGE_READ_ONLY 7     // every mount read-only (mount_setattr, AT_RECURSIVE)
#define APH_NS_STAGE_TMPFS 8         // the tmpfs over the hidden folder
#define APH_NS_STAGE_MKDIR 9         // a folder in it
#define APH_NS_STAGE_MOVE 10         // move_mount of a writable folder into place
#define APH_NS_STAGE_TMPFS_RO 11     // the tmpfs read-only
#define APH_NS_STAGE_COVER 12        // covering a protected file (aph_namespaces.covered)
#define APH_NS_STAGE_DEATH_SIGNAL 13 // PR_SET_PDEATHSIG, and the parent still there

/// What `aph_spawn` reports. On success pid/pidfd are set; on failure step
/// says which step failed and detail which fd/rlimit index (when relevant).
struct aph_spawn_result {
    pid_t pid;
    int pidfd;
    int step;
    int detail;
};

/// Spawns a child vfork-style, as glibc's posix_spawn does: clone(CLONE_VM |
/// CLONE_VFORK | CLONE_PIDFD) on a dedicated mmap'ed stack with every signal
/// blocked (fallback when CLONE_PIDFD is refused: clone without it +
/// pidfd_open). The child shares the caller's memory, so no page tables are
/// copied, and the calling thread is suspended until the child has exec'd or
/// exited. In the child, with raw syscalls only: resets signals, setsid,
/// joins its cgroups, PDEATHSIG, NO_NEW_PRIVS, Landlock, installs 0-4, closes every other descriptor,
/// chdir, rlimits, capabilities, seccomp, execve. Returns 0, or the errno of the failed step
/// (`result->step`). A child that failed before execve has already been
/// reaped when this returns.
int aph_spawn(const struct aph_spawn_settings *settings,
              struct aph_spawn_result *result);

// MARK: - Run-loop stamp page (the foreground hang watchdog)

/// Size of a run-loop stamp page: one page, of which the first 16 bytes are
/// used (layout in CAppHostStamp's aph_stamp.h).
#define APH_STAMP_PAGE_SIZE 4096

/// Makes one app's run-loop stamp page: a memfd of APH_STAMP_PAGE_SIZE zero
/// bytes (MFD_CLOEXEC | MFD_ALLOW_SEALING) sealed against shrinking, growing
/// and further sealing, so the app that writes it can never make a reader's
/// mapping fault (SIGBUS), and a read-only shared mapping of it for the host.
/// `*fd_out` is for the child (APH_STAMP_FD); the caller closes it once the
/// child is spawned and unmaps `*map_out` (APH_STAMP_PAGE_SIZE bytes) when
/// the app is gone. Returns 0 or an errno (nothing is left open then).
int aph_stamp_page_create(int *fd_out, void **map_out);

// MARK: - Landlock (ruleset built in the parent, enforced by the child)

/// The Landlock ABI version of the running kernel (1, 2, ...). ENOSYS when
/// the kernel lacks Landlock, EOPNOTSUPP when it is built in but disabled.
int aph_landlock_abi_version(int *abi_out);

/// Every file-system access right Landlock ABI `abi` knows (REFER from 2,
/// TRUNCATE from 3, IOCTL_DEV from 5); 0 for abi < 1.
uint64_t aph_landlock_fs_rights(int abi);

/// LANDLOCK_ACCESS_NET_BIND_TCP (ABI 4): binding a TCP socket to a port.
#define APH_LANDLOCK_ACCESS_NET_BIND_TCP 1
/// LANDLOCK_ACCESS_NET_CONNECT_TCP (ABI 4): connecting a TCP socket.
#define APH_LANDLOCK_ACCESS_NET_CONNECT_TCP 2
/// LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (ABI 6): no connecting or sending to
/// an abstract Unix socket made outside the domain.
#define APH_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET 1
/// LANDLOCK_SCOPE_SIGNAL (ABI 6): no signals to processes outside the domain.
#define APH_LANDLOCK_SCOPE_SIGNAL 2

/// landlock_create_ruleset handling `handled_access_fs`, `handled_access_net`
/// (ABI 4; pass 0 before) and `scoped` (ABI 6; pass 0 before). The
/// descriptor is close-on-exec.
int aph_landlock_create_ruleset(uint64_t handled_access_fs, uint64_t handled_access_net,
                                uint64_t scoped, int *fd_out);

/// openat(dir_fd, name, O_PATH | O_CLOEXEC, plus O_NOFOLLOW unless `follow`):
/// a descriptor naming a file without opening it for reading, enough for
/// fstat, a Landlock rule or a base of further *at calls. 0 or an errno.
int aph_open_path(int dir_fd, const char *name, int follow, int *fd_out);

/// Grants `allowed_access` beneath the file or directory open at `path_fd`
/// (an O_PATH descriptor is enough; the caller keeps and closes it). On
/// anything but a directory the rights are narrowed to the file rights
/// (Landlock refuses directory rights there); a symbolic link opened with
/// O_NOFOLLOW gets a rule on the link itself, which grants nothing through it.
int aph_landlock_add_path_rule(int ruleset_fd, int path_fd, uint64_t allowed_access);

// As aph_landlock_add_path_rule, for a caller that has already fstat'ed
// `path_fd`: `is_directory` says whether it is a directory.
int aph_landlock_add_path_rule_stat(int ruleset_fd, int path_fd, uint64_t allowed_access, int is_directory);

// MARK: - pidfd and wait

/// pidfd_open(pid, 0).
int aph_pidfd_open(pid_t pid, int *pidfd_out);

/// pidfd_send_signal(pidfd, sig, NULL, 0). ESRCH once the child has exited.
int aph_pidfd_send_signal(int pidfd, int sig);

/// Options for the waitid wrappers.
#define APH_WNOHANG 0x00000001
#define APH_WSTOPPED 0x00000002
#define APH_WEXITED 0x00000004
#define APH_WCONTINUED 0x00000008
#define APH_WNOWAIT 0x01000000

/// `aph_wait_result.code` values (the siginfo si_code for SIGCHLD).
#define APH_CLD_EXITED 1
#define APH_CLD_KILLED 2
#define APH_CLD_DUMPED 3
#define APH_CLD_TRAPPED 4
#define APH_CLD_STOPPED 5
#define APH_CLD_CONTINUED 6

/// One waitid report. pid is 0 when WNOHANG found nothing.
struct aph_wait_result {
    pid_t pid;
    int code;   // APH_CLD_*
    int status; // exit code or signal number
};

/// waitid(P_PIDFD, pidfd, ..., options); retries EINTR.
int aph_waitid_pidfd(int pidfd, int options, struct aph_wait_result *out);

/// waitid(P_ALL, 0, ..., options); retries EINTR.
int aph_waitid_all(int options, struct aph_wait_result *out);

// MARK: - epoll and eventfd

/// epoll_create1(EPOLL_CLOEXEC).
int aph_epoll_create(int *epfd_out);

/// Watches `fd` for readability (level-triggered); `key` comes back from wait.
int aph_epoll_add(int epfd, int fd, uint64_t key);

/// Stops watching `fd`.
int aph_epoll_remove(int epfd, int fd);

/// Watches `fd` for readability once (EPOLLIN | EPOLLONESHOT) with `key`; with `rearm`
/// non-zero, arms an fd already added (EPOLL_CTL_MOD) for the next time. 0 or errno.
int aph_epoll_add_oneshot(int epfd, int fd, uint64_t key, int rearm);

/// Blocks until at least one watched fd is ready; writes up to `capacity`
/// keys. EINTR is returned as 0 with `*count_out` = 0.
int aph_epoll_wait(int epfd, uint64_t *keys, int capacity, int *count_out);

/// eventfd(0, EFD_CLOEXEC [| EFD_NONBLOCK]).
int aph_eventfd_create(int nonblocking, int *fd_out);

/// Adds 1 to the eventfd counter.
int aph_eventfd_signal(int fd);

/// Reads (and so resets) the counter. Blocks on a blocking eventfd; on a
/// nonblocking one returns 0 whether or not anything was pending.
int aph_eventfd_drain(int fd);

/// timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC).
int aph_timerfd_create(int *fd_out);

/// Arms the timerfd to expire once, `nanoseconds` from now (at least 1 ns);
/// 0 disarms it. Neither wakes a thread blocked on it unless it expires.
int aph_timerfd_set(int fd, int64_t nanoseconds);

/// Blocks until `timer` expired (returns 0 with *fired_out = 1, its count
/// read) or `stop` became readable (*fired_out = 0). EINTR: *fired_out = 0.
int aph_timerfd_wait(int timer, int stop, int *fired_out);

// MARK: - Descriptors

/// socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC).
int aph_socketpair(int *fd0_out, int *fd1_out);

/// pipe2(O_CLOEXEC).
int aph_pipe(int *read_fd_out, int *write_fd_out);

/// flock(fd, LOCK_EX | LOCK_NB); EWOULDBLOCK when another holder has it.
int aph_flock_exclusive_nonblocking(int fd);

/// flock(fd, LOCK_UN): releases the lock even if a forked child still shares
/// the open file description for a moment (before its close_range/exec).
int aph_flock_unlock(int fd);

/// Names the calling thread (truncated to 15 bytes), as shown in /proc and gdb.
int aph_set_thread_name(const char *name);

// MARK: - Raw syscall (for probes)

/// syscall(number, a0..a5); the return value goes to `*result_out` (may be
/// NULL). Returns 0 or the errno.
int aph_syscall6(long number, long a0, long a1, long a2, long a3, long a4,
                 long a5, long *result_out);

// MARK: - Write-behind (the transfer daemon's downloads)

/// Starts writeback of `length` bytes at `offset` of `fd` without waiting
/// (sync_file_range SYNC_FILE_RANGE_WRITE). 0 or an errno value.
int aph_writeback_start(int fd, int64_t offset, int64_t length);

/// Waits until the range has been written back (starting what is not yet), then,
/// when `drop` is non-zero, drops it from the page cache (POSIX_FADV_DONTNEED).
/// 0 or an errno value.
int aph_writeback_wait(int fd, int64_t offset, int64_t length, int drop);

/// O_DIRECT (not exported by Swift's Glibc module): the page cache bypassed; an open
/// with it fails with EINVAL where the file system does not do direct I/O.
int aph_o_direct_flag(void);

/// Opens `path`, relative to the folder `dirfd`, without following any symbolic link
/// on the way or at the end: each folder is opened in turn with O_PATH | O_DIRECTORY |
/// O_NOFOLLOW, the last component with `flags | O_NOFOLLOW | O_CLOEXEC` (and `mode`
/// when creating). An absolute path, an empty component, "." or ".." is refused
/// (EINVAL, EACCES); a link met anywhere fails (ELOOP or ENOTDIR). The descriptor goes
/// to `*fd_out`. 0 or an errno value.
int aph_open_beneath(int dirfd, const char *path, int flags, unsigned int mode, int *fd_out);

/// glibc's `mallopt(M_MMAP_THRESHOLD, bytes)` (malloc.h is not in Swift's Glibc module):
/// 1 if taken, 0 if not.
int aph_malloc_mmap_threshold(int bytes);

/// malloc_trim(0): gives the free memory of every glibc arena back to the kernel
/// (MADV_DONTNEED on whole free pages, the heap's top trimmed). Returns 1 if any was.
int aph_malloc_trim(void);

#ifdef __cplusplus
}
#endif

#endif // APH_SYS_H
