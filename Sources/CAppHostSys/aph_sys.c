// aph_sys.c — see include/aph_sys.h.
//
// Rule for everything under "child": the child is cloned vfork-style
// (CLONE_VM|CLONE_VFORK, as glibc's posix_spawn): it runs on its own stack in
// the parent's memory while the parent thread sleeps, makes only raw syscalls
// (no libc wrapper, no malloc, no libseccomp, no locks, no errno) and leaves
// through execve or exit_group.
#define _GNU_SOURCE 1

#include <malloc.h>
#include "aph_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <poll.h>
#include <sys/wait.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
// Landlock's numbers are the same on every architecture (Linux 5.13).
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif

// MARK: - Seccomp

// Kernel-wide or cross-process powers no app needs: tracing, namespaces and
// mounts (old and new mount API), BPF and perf, modules and kexec, reboot,
// the kernel keyring, other processes' memory, swap, clock setting, and
// userfaultfd (a way to stall the kernel mid-copy that exploits use; container
// runtimes' default profiles deny it too). Other processes' limits and nice
// values are denied by argument (aph_seccomp_compile).
static const char *const aph_baseline_names[] = {
    "ptrace", "mount", "umount2", "unshare", "setns", "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "keyctl", "add_key", "request_key",
    "process_vm_readv", "process_vm_writev", "pivot_root", "swapon", "swapoff",
    "open_by_handle_at", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "quotactl", "acct", "settimeofday",
    "clock_settime", "iopl", "ioperm", "userfaultfd",
};

const char *const *aph_seccomp_baseline_names(size_t *count_out) {
    if (count_out) *count_out = sizeof(aph_baseline_names) / sizeof(aph_baseline_names[0]);
    return aph_baseline_names;
}

int aph_seccomp_resolve(const char *name, int *number_out) {
    if (name == NULL || number_out == NULL) return EINVAL;
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return ENOENT;
    *number_out = nr;
    return 0;
}

void aph_bpf_program_free(struct aph_bpf_program *program) {
    if (program == NULL) return;
    free(program->instructions);
    program->instructions = NULL;
    program->length = 0;
}

// libseccomp returns negative errno values.
static int aph_scmp_error(int rc) { return rc < 0 ? -rc : EINVAL; }

// Reads the whole memfd back into a malloc'ed buffer.
static int aph_read_back(int fd, void **buffer_out, size_t *size_out) {
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    size_t size = (size_t)st.st_size;
    if (size == 0) return EINVAL;
    char *buffer = malloc(size);
    if (buffer == NULL) return ENOMEM;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, buffer + done, size - done, (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buffer);
            return e;
        }
        if (n == 0) break;
        done += (size_t)n;
    }
    if (done != size) {
        free(buffer);
        return EIO;
    }
    *buffer_out = buffer;
    *size_out = size;
    return 0;
}

int aph_seccomp_compile(const struct aph_seccomp_settings *s,
                        struct aph_bpf_program *out) {
    if (s == NULL || out == NULL) return EINVAL;
    if (s->extra_denied_count > 0 && s->extra_denied == NULL) return EINVAL;
    if (s->denied_socket_family_count > 0 && s->denied_socket_families == NULL) return EINVAL;
    out->instructions = NULL;
    out->length = 0;

    int deny_errno = s->deny_errno > 0 ? s->deny_errno : EPERM;
    uint32_t deny = SCMP_ACT_ERRNO((uint32_t)deny_errno);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) return ENOMEM;
    // A binary tree of syscall numbers instead of a list: every spawn loads the
    // filter, and at load the kernel runs it once for each syscall number to
    // find those it may always allow (its allow cache), so a list's length is
    // paid some 450 times. Loading an app's filter (112 instructions as a list,
    // 124 as a tree) took 76-88 µs in the child as a list, 48-59 µs as a tree.
    // Same rules; a libseccomp without the attribute keeps the list.
    (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

    int rc = 0;
    // A rule equal to the default action (e.g. a name that resolves to
    // nothing here) is rejected with -EACCES by libseccomp; names come from
    // our own list or were resolved by the caller, so any error is real.
    if (s->include_baseline) {
        size_t n = sizeof(aph_baseline_names) / sizeof(aph_baseline_names[0]);
        for (size_t i = 0; i < n && rc == 0; i++) {
            int nr = seccomp_syscall_resolve_name(aph_baseline_names[i]);
            if (nr == __NR_SCMP_ERROR) continue; // not on this architecture
            rc = seccomp_rule_add(ctx, deny, nr, 0);
        }
    }
    if (rc == 0 && s->include_baseline) {
        // Another process's resource limits and nice value, which the kernel
        // allows to the same uid: prlimit64 with a pid (argument 0) other
        // than 0 (itself); setpriority with a who (argument 1) other than 0
        // or a which (argument 0) other than PRIO_PROCESS (PRIO_USER with who
        // 0 is every process of the caller's uid). glibc's getrlimit and
        // setrlimit call prlimit64(0, ...); libdispatch sets its workers' nice
        // value with setpriority(PRIO_PROCESS, 0, n). pid_t, id_t and the
        // which enum are 32 bits: comparing all 64 with 0 denies a value whose
        // low half is 0 and high half is not, which the kernel reads as 0:
        // more than needed, never less.
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_NE, 0));
        if (rc == 0) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(setpriority), 1, SCMP_A1(SCMP_CMP_NE, 0));
        }
        if (rc == 0) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(setpriority), 1,
                                  SCMP_A0(SCMP_CMP_NE, (uint64_t)PRIO_PROCESS));
        }
    }
    for (size_t i = 0; i < s->extra_denied_count && rc == 0; i++) {
        rc = seccomp_rule_add(ctx, deny, s->extra_denied[i], 0);
    }
    // The family is argument 0 of socket and socketpair. The kernel reads it
    // as an int, so compare the low 32 bits only: an equality on all 64 would
    // let garbage in the upper half through.
    for (size_t i = 0; i < s->denied_socket_family_count && rc == 0; i++) {
        uint64_t family = (uint32_t)s->denied_socket_families[i];
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, family));
        if (rc == 0) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socketpair), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, family));
        }
    }
    if (rc == 0 && s->deny_unix_socket_creation) {
        // socket(AF_UNIX, ...) would reach any listening Unix socket whose
        // path (or abstract name) the app can name: Landlock does not check
        // connect(2). socketpair(AF_UNIX) makes an already connected pair
        // (stream and seqpacket ends cannot connect elsewhere: EISCONN); a
        // datagram end could sendto(2) any path, so datagram pairs are denied
        // (SOCK_RAW is a datagram socket for AF_UNIX). The type's low 4 bits
        // are the kind; SOCK_CLOEXEC and SOCK_NONBLOCK live above them.
        rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)AF_UNIX));
        const uint64_t datagram_kinds[] = { SOCK_DGRAM, SOCK_RAW };
        for (size_t i = 0; i < 2 && rc == 0; i++) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(socketpair), 2,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)AF_UNIX),
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, datagram_kinds[i]));
        }
    }
    if (rc == 0 && (s->denied_socket_family_count > 0 || s->deny_unix_socket_creation)) {
        // io_uring's IORING_OP_SOCKET (Linux 5.19) makes sockets of any
        // family without entering the socket syscall.
        int nr = seccomp_syscall_resolve_name("io_uring_setup");
        if (nr != __NR_SCMP_ERROR) rc = seccomp_rule_add(ctx, deny, nr, 0);
    }
    // clone3 passes its flags in memory, which a filter cannot read: refuse it
    // with ENOSYS, so glibc falls back to clone, whose flags are argument 0.
    // One rule for both settings that need it.
    if (rc == 0 && (s->deny_namespace_clone || s->deny_process_creation)) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    }
    if (rc == 0 && s->deny_namespace_clone) {
        // clone's flags are argument 0 on every architecture. One rule per
        // flag: rules on one syscall are OR'ed. (CLONE_NEWTIME overlaps the
        // exit-signal byte of clone(2) and is only reachable through clone3
        // and unshare, both denied.)
        const uint64_t ns_flags[] = {
            CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
            CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
        };
        for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]) && rc == 0; i++) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
        }
    }
    if (rc == 0 && s->deny_process_creation) {
        // No new process: a clone without CLONE_THREAD (fork, vfork,
        // posix_spawn all come down to one) fails; a thread (CLONE_THREAD,
        // which the kernel accepts only with CLONE_VM and CLONE_SIGHAND) is
        // made. fork and vfork are missing on some architectures (aarch64,
        // riscv64): libseccomp resolves them to nothing or a negative
        // pseudo-number there.
        const char *const process_calls[] = { "fork", "vfork" };
        for (size_t i = 0; i < 2 && rc == 0; i++) {
            int nr = seccomp_syscall_resolve_name(process_calls[i]);
            if (nr == __NR_SCMP_ERROR || nr < 0) continue;
            rc = seccomp_rule_add(ctx, deny, nr, 0);
        }
        if (rc == 0) {
            rc = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, (uint64_t)CLONE_THREAD, 0));
        }
    }
    if (rc != 0) {
        seccomp_release(ctx);
        return aph_scmp_error(rc);
    }

    // libseccomp 2.5.4 has no seccomp_export_bpf_mem: export into a memfd.
    int fd = memfd_create("aph-seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        seccomp_release(ctx);
        return e;
    }
    rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (rc != 0) {
        close(fd);
        return aph_scmp_error(rc);
    }
    void *buffer = NULL;
    size_t size = 0;
    int e = aph_read_back(fd, &buffer, &size);
    close(fd);
    if (e != 0) return e;
    size_t count = size / sizeof(struct sock_filter);
    if (size % sizeof(struct sock_filter) != 0 || count == 0 || count > BPF_MAXINSNS) {
        free(buffer);
        return E2BIG;
    }
    out->instructions = buffer;
    out->length = (unsigned short)count;
    return 0;
}

// MARK: - Landlock

// The installed uapi header stops at ABI 2; later rights by number.
#define APH_LL_EXECUTE (1ULL << 0)
#define APH_LL_WRITE_FILE (1ULL << 1)
#define APH_LL_READ_FILE (1ULL << 2)
#define APH_LL_LAST_ABI1 (1ULL << 12)  // MAKE_SYM
#define APH_LL_REFER (1ULL << 13)      // ABI 2
#define APH_LL_TRUNCATE (1ULL << 14)   // ABI 3
#define APH_LL_IOCTL_DEV (1ULL << 15)  // ABI 5
// What a rule on something other than a directory may grant.
#define APH_LL_FILE_RIGHTS (APH_LL_EXECUTE | APH_LL_WRITE_FILE | APH_LL_READ_FILE | \
                            APH_LL_TRUNCATE | APH_LL_IOCTL_DEV)
#define APH_LL_CREATE_RULESET_VERSION (1U << 0)
#define APH_LL_RULE_PATH_BENEATH 1

// struct landlock_ruleset_attr as of ABI 6. Older kernels accept it as long
// as the fields they do not know are zero (copy_struct_from_user).
struct aph_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; // ABI 4
    uint64_t scoped;             // ABI 6
};

// struct landlock_path_beneath_attr (packed in the uapi header).
struct __attribute__((packed)) aph_landlock_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
};

int aph_landlock_abi_version(int *abi_out) {
    if (abi_out == NULL) return EINVAL;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, APH_LL_CREATE_RULESET_VERSION);
    if (abi < 0) return errno;
    *abi_out = (int)abi;
    return 0;
}

uint64_t aph_landlock_fs_rights(int abi) {
    if (abi < 1) return 0;
    uint64_t rights = (APH_LL_LAST_ABI1 << 1) - 1;
    if (abi >= 2) rights |= APH_LL_REFER;
    if (abi >= 3) rights |= APH_LL_TRUNCATE;
    if (abi >= 5) rights |= APH_LL_IOCTL_DEV;
    return rights;
}

int aph_landlock_create_ruleset(uint64_t handled_access_fs, uint64_t handled_access_net,
                                uint64_t scoped, int *fd_out) {
    if (fd_out == NULL) return EINVAL;
    struct aph_landlock_ruleset_attr attr = { handled_access_fs, handled_access_net, scoped };
    // The kernel makes the descriptor close-on-exec.
    long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0U);
    if (fd < 0) return errno;
    *fd_out = (int)fd;
    return 0;
}

int aph_open_path(int dir_fd, const char *name, int follow, int *fd_out) {
    if (name == NULL || fd_out == NULL) return EINVAL;
    int fd = openat(dir_fd, name, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) return errno;
    *fd_out = fd;
    return 0;
}

int aph_landlock_add_path_rule(int ruleset_fd, int path_fd, uint64_t allowed_access) {
    struct stat st;
    if (fstat(path_fd, &st) != 0) return errno;
    return aph_landlock_add_path_rule_stat(ruleset_fd, path_fd, allowed_access, S_ISDIR(st.st_mode));
}

int aph_landlock_add_path_rule_stat(int ruleset_fd, int path_fd, uint64_t allowed_access, int is_directory) {
    // Landlock refuses directory rights (EINVAL) on anything else.
    if (!is_directory) allowed_access &= APH_LL_FILE_RIGHTS;
    if (allowed_access == 0) return 0;
    struct aph_landlock_path_beneath_attr attr = { allowed_access, path_fd };
    if (syscall(SYS_landlock_add_rule, ruleset_fd, APH_LL_RULE_PATH_BENEATH, &attr, 0U) != 0) return errno;
    return 0;
}

// MARK: - Raw syscalls (child side)

// The child shares the parent's memory (CLONE_VM) and so the parent thread's
// TLS: glibc's wrappers would write the parent's errno and, for cancellation
// points, read its cancellation state. The child therefore calls the kernel
// directly; these return the result or -errno and touch no libc state.

// For the functions the child runs: sanitizer instrumentation would update
// the parent thread's runtime state (shared memory and TLS) from the child.
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define APH_CHILD_CODE __attribute__((no_sanitize("address", "thread", "undefined")))
#endif
#endif
#ifndef APH_CHILD_CODE
#define APH_CHILD_CODE
#endif

#if defined(__x86_64__)
APH_CHILD_CODE
static inline long aph_raw6(long n, long a0, long a1, long a2, long a3, long a4, long a5) {
    register long r10 __asm__("r10") = a3;
    register long r8 __asm__("r8") = a4;
    register long r9 __asm__("r9") = a5;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a0), "S"(a1), "d"(a2), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
APH_CHILD_CODE
static inline long aph_raw6(long n, long a0, long a1, long a2, long a3, long a4, long a5) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a0;
    register long x1 __asm__("x1") = a1;
    register long x2 __asm__("x2") = a2;
    register long x3 __asm__("x3") = a3;
    register long x4 __asm__("x4") = a4;
    register long x5 __asm__("x5") = a5;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory", "cc");
    return x0;
}
#else
// Elsewhere through glibc's syscall(): it writes the (suspended) parent
// thread's errno on failure, which nothing reads.
APH_CHILD_CODE
static long aph_raw6(long n, long a0, long a1, long a2, long a3, long a4, long a5) {
    long ret = syscall(n, a0, a1, a2, a3, a4, a5);
    return ret == -1 ? -(long)errno : ret;
}
#endif

#define APH_RAW0(n) aph_raw6((n), 0, 0, 0, 0, 0, 0)
#define APH_RAW1(n, a) aph_raw6((n), (long)(a), 0, 0, 0, 0, 0)
#define APH_RAW2(n, a, b) aph_raw6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define APH_RAW3(n, a, b, c) aph_raw6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define APH_RAW4(n, a, b, c, d) aph_raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define APH_RAW5(n, a, b, c, d, e) aph_raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

// The kernel's signal set for rt_sigaction / rt_sigprocmask (64 signals).
#define APH_KERNEL_SIGSET_SIZE 8

// MARK: - Spawn: child side

struct aph_child_report {
    int32_t step;
    int32_t error;
    int32_t detail;
};

// What the child routine reads. Lives in aph_spawn's frame, which stays put
// while the parent thread is suspended (CLONE_VFORK).
struct aph_child_args {
    const struct aph_spawn_settings *s;
    const struct sock_fprog *filter;
    // The lockdown filter (app_lockdown), made by the parent; the child
    // writes its own pid into `pid_slots` before it loads it. NULL: none.
    struct sock_fprog *lockdown;
    const unsigned short *pid_slots;
    int pid_slot_count;
    // What the child passes to execve: the settings' own, or with
    // app_lockdown the copies at random addresses the lockdown allows.
    const char *exec_path;
    char *const *exec_argv;
    int report_fd;      // write end of the error pipe (CLOEXEC)
    int report_read_fd; // the parent's read end
    pid_t parent;
    // With namespaces: a pidfd of the parent process (CLOEXEC), which tells
    // the child whether its parent is still there (getppid() is 0 in a pid
    // namespace of its own); -1 otherwise.
    int parent_pidfd;
};

__attribute__((noreturn))
APH_CHILD_CODE
static void aph_child_exit(int code) {
    for (;;) (void)APH_RAW1(SYS_exit_group, code);
}

// `error` is a positive errno value.
__attribute__((noreturn))
APH_CHILD_CODE
static void aph_child_fail(int report_fd, int step, int error, int detail) {
    struct aph_child_report report = { step, error, detail };
    long n;
    do {
        n = APH_RAW3(SYS_write, report_fd, &report, sizeof(report));
    } while (n == -EINTR);
    aph_child_exit(127);
}

// The layout getdents64 writes.
struct aph_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

// The kernel's struct rlimit64 (prlimit64); ~0 is infinity.
struct aph_rlimit64 {
    uint64_t cur;
    uint64_t max;
};

// Closes every descriptor >= first except `keep`, without close_range.
// Returns 0 or a positive errno.
APH_CHILD_CODE
static int aph_close_fallback(int first, int keep) {
    long dfd = APH_RAW4(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0) {
        // No /proc: close by number up to the soft limit (capped).
        struct aph_rlimit64 rl;
        long max = 65536;
        if (APH_RAW4(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0 && rl.cur < (uint64_t)max) {
            max = (long)rl.cur;
        }
        for (long fd = first; fd < max; fd++) {
            if (fd != keep) (void)APH_RAW1(SYS_close, fd);
        }
        return 0;
    }
    char buffer[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = APH_RAW3(SYS_getdents64, dfd, buffer, sizeof(buffer));
        if (n == -EINTR) continue;
        if (n < 0) {
            (void)APH_RAW1(SYS_close, dfd);
            return (int)-n;
        }
        if (n == 0) break;
        for (long offset = 0; offset < n;) {
            struct aph_dirent64 *entry = (struct aph_dirent64 *)(buffer + offset);
            offset += entry->d_reclen;
            const char *p = entry->d_name;
            if (*p < '0' || *p > '9') continue;
            long fd = 0;
            for (; *p >= '0' && *p <= '9'; p++) fd = fd * 10 + (*p - '0');
            if (fd >= first && fd != keep && fd != dfd) (void)APH_RAW1(SYS_close, fd);
        }
    }
    (void)APH_RAW1(SYS_close, dfd);
    return 0;
}

// Closes every descriptor >= first except `keep` (keep >= first).
APH_CHILD_CODE
static int aph_close_from(int first, int keep) {
    if (keep > first &&
        APH_RAW3(SYS_close_range, (unsigned int)first, (unsigned int)(keep - 1), 0U) != 0) {
        return aph_close_fallback(first, keep);
    }
    if (APH_RAW3(SYS_close_range, (unsigned int)(keep + 1), ~0U, 0U) != 0) {
        return aph_close_fallback(first, keep);
    }
    return 0;
}

// capget/capset (version 3: two 32-bit words per set).
struct aph_cap_header {
    uint32_t version;
    int pid;
};
struct aph_cap_data {
    uint32_t effective;
    uint32_t permitted;
    uint32_t inheritable;
};
#define APH_CAP_VERSION_3 0x20080522
#define APH_CAP_SETPCAP 8
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef PR_SET_SECUREBITS
#define PR_SET_SECUREBITS 28
#endif
#ifndef PR_CAPBSET_READ
#define PR_CAPBSET_READ 23
#endif
#ifndef PR_CAPBSET_DROP
#define PR_CAPBSET_DROP 24
#endif
// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_NO_CAP_AMBIENT_RAISE,
// each with its lock, and SECBIT_KEEP_CAPS locked off: uid 0 gains nothing
// by execve, and no later setuid or ambient raise can bring a capability back.
// NO_SETUID_FIXUP also keeps the capabilities through the child's own setresuid
// (its identity), so the drop that follows is the one place they go.
#define APH_SECUREBITS 0xEF
// The same without SECBIT_NO_CAP_AMBIENT_RAISE (and its lock), for a child that
// keeps some capabilities as ambient ones through execve.
#define APH_SECUREBITS_AMBIENT 0x2F
#ifndef PR_CAP_AMBIENT_RAISE
#define PR_CAP_AMBIENT_RAISE 2
#endif

// First half of dropping every capability but `keep`: the securebits and the
// bounding set (both need CAP_SETPCAP; a host without it, not root, has nothing
// there to lose: NO_NEW_PRIVS already stops execve from granting more than the
// permitted set). Returns 0, or a positive errno with `*stage_out` saying which
// stage failed (0 securebits, 1 bounding set, 3 capget).
APH_CHILD_CODE
static int aph_capabilities_lock(uint64_t keep, long *stage_out) {
    struct aph_cap_header header = { APH_CAP_VERSION_3, 0 };
    struct aph_cap_data data[2];
    long rc = APH_RAW2(SYS_capget, &header, data);
    if (rc < 0) {
        *stage_out = 3;
        return (int)-rc;
    }
    if (!(data[0].effective & (1U << APH_CAP_SETPCAP))) return 0;
    rc = APH_RAW5(SYS_prctl, PR_SET_SECUREBITS,
                  (unsigned long)(keep != 0 ? APH_SECUREBITS_AMBIENT : APH_SECUREBITS), 0UL, 0UL, 0UL);
    if (rc < 0) {
        *stage_out = 0;
        return (int)-rc;
    }
    // Dropped without reading first (a host with CAP_SETPCAP has them all): one
    // syscall a capability instead of two, on every spawn.
    for (unsigned long cap = 0; cap < 64; cap++) {
        if (keep & (1ULL << cap)) continue;
        rc = APH_RAW5(SYS_prctl, PR_CAPBSET_DROP, cap, 0UL, 0UL, 0UL);
        if (rc == -EINVAL) break; // past the kernel's last capability
        if (rc < 0) {
            *stage_out = 1;
            return (int)-rc;
        }
    }
    return 0;
}

// Second half: clears the ambient set and sets permitted, effective and
// inheritable to `keep` (lowering is always allowed), then raises each kept
// capability into the ambient set so that it survives execve (uid 0's own
// capabilities do not: SECBIT_NOROOT). Returns 0, or a positive errno with
// `*stage_out` saying which stage failed (2 ambient set, 3 capset).
APH_CHILD_CODE
static int aph_capabilities_finish(uint64_t keep, long *stage_out) {
    // EINVAL: a kernel before 4.3 has no ambient set.
    long rc = APH_RAW5(SYS_prctl, PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL);
    if (rc < 0 && rc != -EINVAL) {
        *stage_out = 2;
        return (int)-rc;
    }
    struct aph_cap_header header = { APH_CAP_VERSION_3, 0 };
    struct aph_cap_data data[2];
    for (int i = 0; i < 2; i++) {
        uint32_t word = (uint32_t)(keep >> (32 * i));
        data[i].effective = word;
        data[i].permitted = word;
        data[i].inheritable = word;
    }
    rc = APH_RAW2(SYS_capset, &header, data);
    if (rc < 0) {
        *stage_out = 3;
        return (int)-rc;
    }
    for (unsigned long cap = 0; cap < 64; cap++) {
        if (!(keep & (1ULL << cap))) continue;
        rc = APH_RAW5(SYS_prctl, PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_RAISE, cap, 0UL, 0UL);
        if (rc < 0) {
            *stage_out = 2;
            return (int)-rc;
        }
    }
    return 0;
}

// Takes the identity of `s` (umask, groups, gid, uid). Returns 0, or a positive
// errno with `*stage_out` saying which stage failed (0 setgroups, 1 setresgid,
// 2 setresuid).
APH_CHILD_CODE
static int aph_take_identity(const struct aph_spawn_settings *s, long *stage_out) {
    long rc;
    if (s->set_umask) (void)APH_RAW1(SYS_umask, (unsigned long)(s->umask & 0777));
    if (!s->set_identity) return 0;
    rc = APH_RAW2(SYS_setgroups, s->group_count, s->group_count > 0 ? s->groups : NULL);
    if (rc < 0) {
        *stage_out = 0;
        return (int)-rc;
    }
    rc = APH_RAW3(SYS_setresgid, s->gid, s->gid, s->gid);
    if (rc < 0) {
        *stage_out = 1;
        return (int)-rc;
    }
    rc = APH_RAW3(SYS_setresuid, s->uid, s->uid, s->uid);
    if (rc < 0) {
        *stage_out = 2;
        return (int)-rc;
    }
    return 0;
}

// Writes `value` (>= 0) in decimal into `buffer` (no terminator); returns
// the length. No libc: the child may not call snprintf.
APH_CHILD_CODE
static int aph_format_decimal(long value, char *buffer, int capacity) {
    char reversed[24];
    int n = 0;
    unsigned long v = value < 0 ? 0 : (unsigned long)value;
    do {
        reversed[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0 && n < (int)sizeof(reversed));
    if (n > capacity) n = capacity;
    for (int i = 0; i < n; i++) buffer[i] = reversed[n - 1 - i];
    return n;
}

// MARK: - Spawn: namespaces (child side)

// The kernel's struct mount_attr (mount_setattr, Linux 5.12).
struct aph_mount_attr {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};
#define APH_MOUNT_ATTR_RDONLY 0x1
#define APH_MOUNT_ATTR_NOSUID 0x2
#define APH_MOUNT_ATTR_NODEV 0x4
#define APH_MOUNT_ATTR_NOEXEC 0x8
#define APH_OPEN_TREE_CLONE 1
#define APH_MOVE_MOUNT_F_EMPTY_PATH 0x4
#define APH_AT_RECURSIVE 0x8000

// Writes `length` bytes to the file at `path` in one write. 0 or a positive errno.
APH_CHILD_CODE
static int aph_write_file(const char *path, const char *bytes, int length) {
    long fd = APH_RAW4(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0);
    if (fd < 0) return (int)-fd;
    long rc;
    do {
        rc = APH_RAW3(SYS_write, fd, bytes, length);
    } while (rc == -EINTR);
    (void)APH_RAW1(SYS_close, fd);
    if (rc < 0) return (int)-rc;
    return rc == length ? 0 : EIO;
}

// "ID ID 1": `id` mapped to itself, alone.
APH_CHILD_CODE
static int aph_identity_map_line(uint32_t id, char *buffer) {
    int n = aph_format_decimal((long)id, buffer, 12);
    buffer[n++] = ' ';
    n += aph_format_decimal((long)id, buffer + n, 12);
    buffer[n++] = ' ';
    buffer[n++] = '1';
    return n;
}

// The new mount API's constants (linux/mount.h, 5.2).
#define APH_FSOPEN_CLOEXEC 0x1
#define APH_FSCONFIG_SET_STRING 1
#define APH_FSCONFIG_CMD_CREATE 6
#define APH_FSMOUNT_CLOEXEC 0x1
#define APH_MNT_DETACH 2
#define APH_UMOUNT_NOFOLLOW 8

// Covers each of `paths` (files, absolute) with an empty, mode-000 file of a
// fresh, detached tmpfs (source APH_PROTECTED_SOURCE), bound read-only,
// nosuid, nodev and noexec: in this mount namespace the path then opens as
// that file, which an app without capabilities cannot open (EACCES), nor
// change, nor unmount. A descriptor opened before is untouched. `results[i]`
// gets 0 or a positive errno (ENOENT: the file is gone). Returns 0, or a
// positive errno when the tmpfs could not be made (no result set then).
// Raw syscalls only: it runs in the spawn's child and in a forked helper.
APH_CHILD_CODE
static int aph_cover_files(const char *const *paths, size_t count, int *results) {
    if (count == 0) return 0;
    long fs = APH_RAW2(SYS_fsopen, "tmpfs", APH_FSOPEN_CLOEXEC);
    if (fs < 0) return (int)-fs;
    long rc = APH_RAW5(SYS_fsconfig, fs, APH_FSCONFIG_SET_STRING, "source", APH_PROTECTED_SOURCE, 0);
    if (rc >= 0) rc = APH_RAW5(SYS_fsconfig, fs, APH_FSCONFIG_SET_STRING, "size", "4k", 0);
    if (rc >= 0) rc = APH_RAW5(SYS_fsconfig, fs, APH_FSCONFIG_SET_STRING, "nr_inodes", "4", 0);
    if (rc >= 0) rc = APH_RAW5(SYS_fsconfig, fs, APH_FSCONFIG_CMD_CREATE, 0, 0, 0);
    if (rc < 0) {
        (void)APH_RAW1(SYS_close, fs);
        return (int)-rc;
    }
    long mnt = APH_RAW3(SYS_fsmount, fs, APH_FSMOUNT_CLOEXEC, APH_MOUNT_ATTR_NOSUID | APH_MOUNT_ATTR_NODEV | APH_MOUNT_ATTR_NOEXEC);
    (void)APH_RAW1(SYS_close, fs);
    if (mnt < 0) return (int)-mnt;
    long file = APH_RAW4(SYS_openat, mnt, "protected", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
    if (file < 0) {
        (void)APH_RAW1(SYS_close, mnt);
        return (int)-file;
    }
    (void)APH_RAW1(SYS_close, file);
    for (size_t i = 0; i < count; i++) {
        long tree = APH_RAW3(SYS_open_tree, mnt, "protected", APH_OPEN_TREE_CLONE | O_CLOEXEC);
        if (tree < 0) {
            results[i] = (int)-tree;
            continue;
        }
        struct aph_mount_attr attr = { APH_MOUNT_ATTR_RDONLY | APH_MOUNT_ATTR_NOSUID | APH_MOUNT_ATTR_NODEV | APH_MOUNT_ATTR_NOEXEC, 0, 0, 0 };
        rc = APH_RAW5(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr));
        // Not following a last symbolic link: the cover goes on the path itself.
        if (rc >= 0) rc = APH_RAW5(SYS_move_mount, tree, "", AT_FDCWD, paths[i], APH_MOVE_MOUNT_F_EMPTY_PATH);
        results[i] = rc < 0 ? (int)-rc : 0;
        (void)APH_RAW1(SYS_close, tree);
    }
    (void)APH_RAW1(SYS_close, mnt);
    return 0;
}

// An app freshly cloned into new mount and IPC namespaces, and for a host
// run by a user (isolate_user) new user and pid namespaces too (with every
// capability of its new user namespace; a root host's child has root's):
// with isolate_user, dies with its parent and maps the host's uid and gid to
// themselves; then makes
// every mount it sees read-only and nosuid, hides `hidden` under an empty
// tmpfs (read-only once the writable folders are back in it, noexec), and
// keeps its writable folders read-write but noexec at their own paths. Mount changes stay in its own namespace: the
// host and other apps see nothing of them. Returns 0 or a positive errno
// with `*stage_out` an APH_NS_STAGE_*.
APH_CHILD_CODE
static int aph_enter_namespaces(const struct aph_namespaces *ns, int death_signal, int parent_pidfd, long *stage_out) {
    long rc;
    // Its parent-death signal first (no credential change follows: no
    // set_identity with namespaces, and dropping capabilities keeps it).
    *stage_out = APH_NS_STAGE_DEATH_SIGNAL;
    if (ns->isolate_user && death_signal > 0) {
        rc = APH_RAW5(SYS_prctl, PR_SET_PDEATHSIG, (unsigned long)death_signal, 0UL, 0UL, 0UL);
        if (rc < 0) return (int)-rc;
        if (parent_pidfd >= 0) {
            struct pollfd poll_fd = { parent_pidfd, POLLIN, 0 };
            struct timespec zero = { 0, 0 };
            rc = APH_RAW5(SYS_ppoll, &poll_fd, 1, &zero, NULL, 0);
            if (rc != 0) return rc < 0 ? (int)-rc : ESRCH;
        }
    }
    if (ns->isolate_user) {
        char line[32];
        *stage_out = APH_NS_STAGE_SETGROUPS;
        int e = aph_write_file("/proc/self/setgroups", "deny", 4);
        if (e != 0) return e;
        *stage_out = APH_NS_STAGE_UID_MAP;
        e = aph_write_file("/proc/self/uid_map", line, aph_identity_map_line(ns->uid, line));
        if (e != 0) return e;
        *stage_out = APH_NS_STAGE_GID_MAP;
        e = aph_write_file("/proc/self/gid_map", line, aph_identity_map_line(ns->gid, line));
        if (e != 0) return e;
    }

    *stage_out = APH_NS_STAGE_PRIVATE;
    rc = APH_RAW5(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    if (rc < 0) return (int)-rc;

    // Detached copies of the writable folders, taken before the tmpfs hides them.
    int trees[APH_NAMESPACES_MAX_WRITABLE];
    for (size_t i = 0; i < ns->writable_count; i++) {
        *stage_out = APH_NS_STAGE_OPEN_TREE;
        rc = APH_RAW3(SYS_open_tree, AT_FDCWD, ns->writable[i], APH_OPEN_TREE_CLONE | O_CLOEXEC);
        if (rc < 0) return (int)-rc;
        trees[i] = (int)rc;
        *stage_out = APH_NS_STAGE_WRITABLE_ATTR;
        struct aph_mount_attr attr = { APH_MOUNT_ATTR_NOEXEC | APH_MOUNT_ATTR_NOSUID | APH_MOUNT_ATTR_NODEV, 0, 0, 0 };
        rc = APH_RAW5(SYS_mount_setattr, trees[i], "", AT_EMPTY_PATH, &attr, sizeof(attr));
        if (rc < 0) return (int)-rc;
    }

    *stage_out = APH_NS_STAGE_READ_ONLY;
    struct aph_mount_attr read_only = { APH_MOUNT_ATTR_RDONLY | APH_MOUNT_ATTR_NOSUID, 0, 0, 0 };
    rc = APH_RAW5(SYS_mount_setattr, AT_FDCWD, "/", APH_AT_RECURSIVE, &read_only, sizeof(read_only));
    if (rc < 0) return (int)-rc;

    *stage_out = APH_NS_STAGE_TMPFS;
    rc = APH_RAW5(SYS_mount, "apphost", ns->hidden, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=64k,nr_inodes=1024");
    if (rc < 0) return (int)-rc;
    *stage_out = APH_NS_STAGE_MKDIR;
    for (size_t i = 0; i < ns->directory_count; i++) {
        rc = APH_RAW3(SYS_mkdirat, AT_FDCWD, ns->directories[i], 0711);
        if (rc < 0 && rc != -EEXIST) return (int)-rc;
    }
    *stage_out = APH_NS_STAGE_MOVE;
    for (size_t i = 0; i < ns->writable_count; i++) {
        rc = APH_RAW5(SYS_move_mount, trees[i], "", AT_FDCWD, ns->writable[i], APH_MOVE_MOUNT_F_EMPTY_PATH);
        if (rc < 0) return (int)-rc;
        (void)APH_RAW1(SYS_close, trees[i]);
    }
    *stage_out = APH_NS_STAGE_TMPFS_RO;
    struct aph_mount_attr tmpfs_ro = { APH_MOUNT_ATTR_RDONLY, 0, 0, 0 };
    rc = APH_RAW5(SYS_mount_setattr, AT_FDCWD, ns->hidden, 0, &tmpfs_ro, sizeof(tmpfs_ro));
    if (rc < 0) return (int)-rc;

    // A locked device's protected files, covered before the app runs a line.
    if (ns->covered_count > 0) {
        *stage_out = APH_NS_STAGE_COVER;
        int results[APH_NAMESPACES_MAX_COVERED];
        int e = aph_cover_files(ns->covered, ns->covered_count, results);
        if (e != 0) return e;
        for (size_t i = 0; i < ns->covered_count; i++) {
            if (results[i] != 0 && results[i] != ENOENT) return results[i];
        }
    }

    // No /proc of its own: the host's Landlock rules name the host's /proc, and
    // a new one would be out of them (no /proc/self/cmdline, so no arguments
    // for Swift's CommandLine). The host's /proc, read-only, resolves self to
    // it all the same; what it shows of other processes is what Landlock and
    // ptrace's checks leave readable, and no pid there reaches anything.
    return 0;
}

// The kernel's struct sigaction for rt_sigaction (not glibc's).
struct aph_kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

// Runs on its own stack in the parent's memory, with every signal blocked,
// until execve or exit_group: nothing here may return into the parent's
// frames, take a lock, allocate, or go through a libc wrapper (see aph_raw6).
__attribute__((noreturn))
APH_CHILD_CODE
static void aph_child(const struct aph_child_args *a) {
    const struct aph_spawn_settings *s = a->s;
    const int report_fd = a->report_fd;
    long rc;
    int e;

    (void)APH_RAW1(SYS_close, a->report_read_fd);

    // 1. Signals: default dispositions, then an empty mask. The handler
    //    table is a copy of the parent's (no CLONE_SIGHAND), and a handler of
    //    the parent must never run here, on shared memory: reset first, and
    //    only then unblock. This also resets glibc's internal signals 32 and
    //    33, which its sigaction() refuses and which an ignored disposition
    //    would carry across execve. (SIGKILL/SIGSTOP cannot change.)
    struct aph_kernel_sigaction sa = { SIG_DFL, 0, NULL, 0 };
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        (void)APH_RAW4(SYS_rt_sigaction, sig, &sa, NULL, APH_KERNEL_SIGSET_SIZE);
    }
    uint64_t empty = 0;
    rc = APH_RAW4(SYS_rt_sigprocmask, SIG_SETMASK, &empty, NULL, APH_KERNEL_SIGSET_SIZE);
    if (rc < 0) aph_child_fail(report_fd, APH_STEP_SIGNALS, (int)-rc, 0);

    // 2. A new session (and process group).
    rc = APH_RAW0(SYS_setsid);
    if (rc < 0) aph_child_fail(report_fd, APH_STEP_SETSID, (int)-rc, 0);

    // 2b. Its cgroups, before it can run a single instruction of the app:
    //     anything it forks later (a C constructor's fork included) is born
    //     inside them. Before Landlock and the capability drop, which would
    //     forbid the write. Each file takes the pid in decimal, in one write.
    if (s->cgroup_procs_file_count > 0) {
        char digits[24];
        int length = aph_format_decimal(APH_RAW0(SYS_getpid), digits, sizeof(digits));
        for (size_t i = 0; i < s->cgroup_procs_file_count; i++) {
            long fd = APH_RAW4(SYS_openat, AT_FDCWD, s->cgroup_procs_files[i], O_WRONLY | O_CLOEXEC, 0);
            if (fd < 0) aph_child_fail(report_fd, APH_STEP_CGROUP, (int)-fd, (int)i);
            do {
                rc = APH_RAW3(SYS_write, fd, digits, length);
            } while (rc == -EINTR);
            (void)APH_RAW1(SYS_close, fd);
            if (rc < 0) aph_child_fail(report_fd, APH_STEP_CGROUP, (int)-rc, (int)i);
            if (rc != length) aph_child_fail(report_fd, APH_STEP_CGROUP, EIO, (int)i);
        }
    }

    // 2c. Its namespaces (an unprivileged host): after the cgroups (whose
    //     files it could no longer reach once they are read-only), before
    //     Landlock (which forbids changing mounts) and the capability drop
    //     (which takes the power to make them). The parent-death signal is
    //     set there, first.
    if (s->namespaces != NULL) {
        e = aph_enter_namespaces(s->namespaces, s->death_signal, a->parent_pidfd, &rc);
        if (e != 0) aph_child_fail(report_fd, APH_STEP_NAMESPACES, e, (int)rc);
    }

    // 3. (The parent-death signal comes after the identity, step 8b: the
    //    kernel clears it when the uid changes.)

    // 4. No privilege gain through execve (also required for seccomp and
    //    Landlock).
    rc = APH_RAW5(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL);
    if (rc < 0) aph_child_fail(report_fd, APH_STEP_NO_NEW_PRIVS, (int)-rc, 0);

    //    Landlock now, while the ruleset descriptor is still open at its
    //    parent number (step 5 may dup over it or close it; it is also
    //    CLOEXEC). Everything the child opens from here on, /dev/null and
    //    the executable included, is checked against the rules.
    if (s->landlock_ruleset_fd >= 0) {
        rc = APH_RAW2(SYS_landlock_restrict_self, s->landlock_ruleset_fd, 0U);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_LANDLOCK, (int)-rc, 0);
    }

    // 5. Descriptors. Copy every source above 4 first so installing one can
    //    not clobber another; the copies are CLOEXEC and go away below.
    //    (The child has its own descriptor table: no CLONE_FILES.)
    int sources[5] = { s->stdin_fd, s->stdout_fd, s->stderr_fd, s->ipc_fd, s->stamp_fd };
    int high[5] = { -1, -1, -1, -1, -1 };
    int dev_null = -1;
    for (int target = 0; target < 5; target++) {
        int source = sources[target];
        if (source < 0) {
            if (target >= APH_IPC_FD) continue;
            if (dev_null < 0) {
                long fd = APH_RAW4(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC, 0);
                if (fd < 0) aph_child_fail(report_fd, APH_STEP_DEV_NULL, (int)-fd, target);
                rc = APH_RAW3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 5);
                if (rc < 0) aph_child_fail(report_fd, APH_STEP_DEV_NULL, (int)-rc, target);
                dev_null = (int)rc;
                if (fd != dev_null) (void)APH_RAW1(SYS_close, fd);
            }
            high[target] = dev_null;
        } else {
            rc = APH_RAW3(SYS_fcntl, source, F_DUPFD_CLOEXEC, 5);
            if (rc < 0) aph_child_fail(report_fd, APH_STEP_DUP, (int)-rc, target);
            high[target] = (int)rc;
        }
    }
    for (int target = 0; target < 5; target++) {
        if (high[target] < 0) continue;
        // dup3 (no dup2 on every architecture); high[target] >= 5 > target.
        rc = APH_RAW3(SYS_dup3, high[target], target, 0);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_DUP, (int)-rc, target);
    }
    // Without an IPC descriptor fd 3 is closed too, without a stamp page 4.
    int first_closed = sources[APH_STAMP_FD] >= 0 ? APH_STAMP_FD + 1
                     : sources[APH_IPC_FD] >= 0 ? APH_IPC_FD + 1 : APH_IPC_FD;
    if (sources[APH_STAMP_FD] >= 0 && sources[APH_IPC_FD] < 0) (void)APH_RAW1(SYS_close, APH_IPC_FD);
    e = aph_close_from(first_closed, report_fd);
    if (e != 0) aph_child_fail(report_fd, APH_STEP_CLOSE_FDS, e, 0);

    // 6. Working directory (the child has its own: no CLONE_FS).
    if (s->working_directory != NULL) {
        rc = APH_RAW1(SYS_chdir, s->working_directory);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_CHDIR, (int)-rc, 0);
    }

    // 7. Resource limits (prlimit64 on ourselves, as glibc's setrlimit does;
    //    UINT64_MAX is RLIM64_INFINITY).
    for (size_t i = 0; i < s->rlimit_count; i++) {
        struct aph_rlimit64 rl = { s->rlimits[i].soft, s->rlimits[i].hard };
        rc = APH_RAW4(SYS_prlimit64, 0, s->rlimits[i].resource, &rl, NULL);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_RLIMIT, (int)-rc, (int)i);
    }

    // 8. Capabilities (a host running as root): none survive into the app
    //    (but `kept_capabilities`), so CAP_KILL, CAP_DAC_OVERRIDE,
    //    CAP_SYS_ADMIN, CAP_NET_RAW ... are gone. After chdir and rlimits,
    //    which may need them. In two halves around the identity: the
    //    securebits (NO_SETUID_FIXUP keeps the capabilities through
    //    setresuid) and the bounding set first, then the identity, which
    //    needs CAP_SETUID/CAP_SETGID, then the sets themselves.
    if (s->drop_capabilities) {
        e = aph_capabilities_lock(s->kept_capabilities, &rc);
        if (e != 0) aph_child_fail(report_fd, APH_STEP_CAPABILITIES, e, (int)rc);
    }
    e = aph_take_identity(s, &rc);
    if (e != 0) aph_child_fail(report_fd, APH_STEP_IDENTITY, e, (int)rc);
    if (s->drop_capabilities) {
        e = aph_capabilities_finish(s->kept_capabilities, &rc);
        if (e != 0) aph_child_fail(report_fd, APH_STEP_CAPABILITIES, e, (int)rc);
    }

    // 8b. Die with the parent (thread). Only now: commit_creds() clears the
    //     parent-death signal whenever the euid, egid, fsuid or fsgid change
    //     (kernel/cred.c), so set before setresuid it was gone, and an app of
    //     a root host outlived a host killed with SIGKILL (issue 32: 20 of 20
    //     suspended apps survived, parent 1). Dropping capabilities keeps it
    //     (the new set is a subset of the old), and so does the execve below
    //     (no set-id bit or file capability gains anything under
    //     NO_NEW_PRIVS). If the parent already died, PDEATHSIG will never
    //     fire: stop here.
    if (s->death_signal > 0 && (s->namespaces == NULL || !s->namespaces->isolate_user)) {
        rc = APH_RAW5(SYS_prctl, PR_SET_PDEATHSIG, (unsigned long)s->death_signal, 0UL, 0UL, 0UL);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_DEATH_SIGNAL, (int)-rc, 0);
        if (APH_RAW0(SYS_getppid) != a->parent) {
            aph_child_fail(report_fd, APH_STEP_PARENT_EXITED, ESRCH, 0);
        }
    }

    // 9. Seccomp last: everything above may use any syscall. The lockdown
    //    first, with this process's pid in it (the main filter may forbid
    //    nothing a second load needs, but this way it cannot).
    if (a->lockdown != NULL) {
        long self = APH_RAW0(SYS_getpid);
        for (int i = 0; i < a->pid_slot_count; i++) a->lockdown->filter[a->pid_slots[i]].k = (uint32_t)self;
        rc = APH_RAW5(SYS_prctl, PR_SET_SECCOMP, (unsigned long)SECCOMP_MODE_FILTER,
                      a->lockdown, 0UL, 0UL);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_LOCKDOWN, (int)-rc, 0);
    }
    if (a->filter != NULL) {
        rc = APH_RAW5(SYS_prctl, PR_SET_SECCOMP, (unsigned long)SECCOMP_MODE_FILTER,
                      a->filter, 0UL, 0UL);
        if (rc < 0) aph_child_fail(report_fd, APH_STEP_SECCOMP, (int)-rc, 0);
    }

    rc = APH_RAW3(SYS_execve, a->exec_path, a->exec_argv, s->envp);
    aph_child_fail(report_fd, APH_STEP_EXEC, (int)-rc, 0);
}

// Entry point for glibc's clone(): runs on the child stack, never returns.
APH_CHILD_CODE
static int aph_child_entry(void *arg) {
    aph_child((const struct aph_child_args *)arg);
}

// MARK: - Spawn: parent side

// Size of the child's stack (plus one guard page below it). The child's
// deepest frame is aph_close_fallback's 4 KiB getdents buffer; only the pages
// it touches are ever backed.
#define APH_CHILD_STACK_SIZE (128 * 1024)

// Moves *fd to a number >= 5 (keeps CLOEXEC) so the child's dup3 onto 0..4
// never hits it.
static int aph_move_high(int *fd) {
    if (*fd >= 5) return 0;
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 5);
    if (moved < 0) return errno;
    (void)close(*fd);
    *fd = moved;
    return 0;
}

static void aph_reap_blocking(int pidfd) {
    siginfo_t info;
    while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &info, WEXITED) != 0 && errno == EINTR) {}
}

// MARK: - Spawn: the lockdown filter (app_lockdown)

#include <linux/audit.h>
#include <sys/random.h>

#if defined(__x86_64__)
#define APH_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define APH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif
#ifndef SYS_sched_setattr
#define SYS_sched_setattr 314
#endif

// A region of `size` bytes at a random address (page-aligned, below 2^47)
// with a random 8-byte-aligned start inside its first page: where the
// launch's execve path and argv are copied, so that the lockdown's pointer
// comparison is a secret of some 44 bits each. Falls back to an address of
// the kernel's choosing (still randomised by ASLR) if eight random ones are
// taken or the kernel ignores MAP_FIXED_NOREPLACE. `*map_out`/`*map_size_out`
// are what to munmap.
static char *aph_random_region(size_t size, size_t page, void **map_out, size_t *map_size_out) {
    uint64_t r[2] = { 0, 0 };
    size_t map_size = 0;
    for (int attempt = 0; attempt < 9; attempt++) {
        int have_random = getrandom(r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r);
        size_t offset = have_random ? (size_t)(r[1] % (page / 8)) * 8 : 0;
        if (offset + size < offset) return NULL;
        map_size = (offset + size + page - 1) / page * page;
        void *hint = NULL;
        int flags = MAP_PRIVATE | MAP_ANONYMOUS;
        if (attempt < 8 && have_random) {
            // Between 4 GiB and 2^47 - 4 GiB.
            uint64_t span = (1ULL << 47) - (1ULL << 33);
            hint = (void *)(uintptr_t)(((r[0] % span) + (1ULL << 32)) & ~(uint64_t)(page - 1));
            flags |= MAP_FIXED_NOREPLACE;
        }
        void *map = mmap(hint, map_size, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (map == MAP_FAILED) continue;
        if (hint != NULL && map != hint) {
            (void)munmap(map, map_size);
            continue;
        }
        *map_out = map;
        *map_size_out = map_size;
        return (char *)map + offset;
    }
    return NULL;
}

// The lockdown program. Jumps are to labels, resolved once the program is
// laid out (classic BPF jumps are forward offsets below 256).
enum { APH_L_NEXT = -1, APH_L_ALLOW, APH_L_DENY, APH_L_OWN_PID, APH_L_IOPRIO, APH_L_EXEC, APH_L_COUNT };
#define APH_LOCKDOWN_MAX 64

struct aph_lockdown {
    struct sock_filter code[APH_LOCKDOWN_MAX];
    int length;
    int label_at[APH_L_COUNT];
    struct { int at; int jt; int jf; } jumps[APH_LOCKDOWN_MAX];
    int jump_count;
    unsigned short pid_slots[4];
    int pid_slot_count;
};

static void aph_ld_emit(struct aph_lockdown *p, struct sock_filter f) {
    if (p->length < APH_LOCKDOWN_MAX) p->code[p->length] = f;
    p->length++;
}

static void aph_ld_label(struct aph_lockdown *p, int label) { p->label_at[label] = p->length; }

// A conditional jump (`op`: BPF_JEQ, BPF_JGE) on k, to labels (APH_L_NEXT: the
// next instruction).
static void aph_ld_jump(struct aph_lockdown *p, int op, uint32_t k, int jt, int jf) {
    if (p->jump_count < APH_LOCKDOWN_MAX) {
        p->jumps[p->jump_count].at = p->length;
        p->jumps[p->jump_count].jt = jt;
        p->jumps[p->jump_count].jf = jf;
        p->jump_count++;
    }
    aph_ld_emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | op | BPF_K, k, 0, 0));
}

// A comparison with the child's pid, written by the child before it loads.
static void aph_ld_jump_own_pid(struct aph_lockdown *p, int jt, int jf) {
    if (p->pid_slot_count < 4) p->pid_slots[p->pid_slot_count++] = (unsigned short)p->length;
    aph_ld_jump(p, BPF_JEQ, 0, jt, jf);
}

static void aph_ld_load(struct aph_lockdown *p, uint32_t offset) {
    aph_ld_emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

// Offsets in struct seccomp_data: the low and high 32 bits of argument i
// (little-endian; AppHost runs on x86_64 and aarch64).
#define APH_ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))
#define APH_ARG_HI(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i) + 4))

static int aph_lockdown_build(struct aph_lockdown *p, const void *path, const void *argv) {
#ifndef APH_AUDIT_ARCH
    (void)p; (void)path; (void)argv;
    return ENOSYS;
#else
    memset(p, 0, sizeof(*p));
    uint64_t path_bits = (uint64_t)(uintptr_t)path, argv_bits = (uint64_t)(uintptr_t)argv;
    // Another architecture's calls (i386's int 0x80 on x86_64) name other
    // numbers: refused whole (the main filter kills them anyway).
    aph_ld_load(p, (uint32_t)offsetof(struct seccomp_data, arch));
    aph_ld_jump(p, BPF_JEQ, APH_AUDIT_ARCH, APH_L_NEXT, APH_L_DENY);
    aph_ld_load(p, (uint32_t)offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
    // x32 calls (the 0x40000000 bit) are other numbers for the same calls.
    aph_ld_jump(p, BPF_JGE, 0x40000000U, APH_L_DENY, APH_L_NEXT);
#endif
    aph_ld_jump(p, BPF_JEQ, SYS_execve, APH_L_EXEC, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_execveat, APH_L_DENY, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_sched_setscheduler, APH_L_OWN_PID, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_sched_setparam, APH_L_OWN_PID, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_sched_setaffinity, APH_L_OWN_PID, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_sched_setattr, APH_L_OWN_PID, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_pidfd_open, APH_L_OWN_PID, APH_L_NEXT);
    aph_ld_jump(p, BPF_JEQ, SYS_ioprio_set, APH_L_IOPRIO, APH_L_ALLOW);

    // Argument 0 is a pid: 0 (itself) or its own. The kernel reads an int:
    // the low 32 bits decide.
    aph_ld_label(p, APH_L_OWN_PID);
    aph_ld_load(p, APH_ARG_LO(0));
    aph_ld_jump(p, BPF_JEQ, 0, APH_L_ALLOW, APH_L_NEXT);
    aph_ld_jump_own_pid(p, APH_L_ALLOW, APH_L_DENY);

    // ioprio_set(which, who, ioprio): IOPRIO_WHO_PROCESS (1) of itself only
    // (not a process group, not every process of a user).
    aph_ld_label(p, APH_L_IOPRIO);
    aph_ld_load(p, APH_ARG_LO(0));
    aph_ld_jump(p, BPF_JEQ, 1, APH_L_NEXT, APH_L_DENY);
    aph_ld_load(p, APH_ARG_LO(1));
    aph_ld_jump(p, BPF_JEQ, 0, APH_L_ALLOW, APH_L_NEXT);
    aph_ld_jump_own_pid(p, APH_L_ALLOW, APH_L_DENY);

    // execve(path, argv, envp): the launch's own pointers, all 64 bits.
    aph_ld_label(p, APH_L_EXEC);
    aph_ld_load(p, APH_ARG_LO(0));
    aph_ld_jump(p, BPF_JEQ, (uint32_t)path_bits, APH_L_NEXT, APH_L_DENY);
    aph_ld_load(p, APH_ARG_HI(0));
    aph_ld_jump(p, BPF_JEQ, (uint32_t)(path_bits >> 32), APH_L_NEXT, APH_L_DENY);
    aph_ld_load(p, APH_ARG_LO(1));
    aph_ld_jump(p, BPF_JEQ, (uint32_t)argv_bits, APH_L_NEXT, APH_L_DENY);
    aph_ld_load(p, APH_ARG_HI(1));
    aph_ld_jump(p, BPF_JEQ, (uint32_t)(argv_bits >> 32), APH_L_ALLOW, APH_L_DENY);

    aph_ld_label(p, APH_L_ALLOW);
    aph_ld_emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    aph_ld_label(p, APH_L_DENY);
    aph_ld_emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
    if (p->length > APH_LOCKDOWN_MAX) return E2BIG;

    for (int i = 0; i < p->jump_count; i++) {
        int at = p->jumps[i].at;
        int targets[2] = { p->jumps[i].jt, p->jumps[i].jf };
        unsigned char offsets[2];
        for (int j = 0; j < 2; j++) {
            int to = targets[j] == APH_L_NEXT ? at + 1 : p->label_at[targets[j]];
            int offset = to - at - 1;
            if (offset < 0 || offset > 255) return EINVAL;
            offsets[j] = (unsigned char)offset;
        }
        p->code[at].jt = offsets[0];
        p->code[at].jf = offsets[1];
    }
    return 0;
#endif
}

int aph_spawn(const struct aph_spawn_settings *s, struct aph_spawn_result *r) {
    if (r == NULL) return EINVAL;
    r->pid = -1;
    r->pidfd = -1;
    r->step = APH_STEP_NONE;
    r->detail = 0;
    if (s == NULL || s->path == NULL || s->argv == NULL || s->envp == NULL ||
        (s->rlimit_count > 0 && s->rlimits == NULL) ||
        (s->cgroup_procs_file_count > 0 && s->cgroup_procs_files == NULL) ||
        (s->group_count > 0 && s->groups == NULL) || s->group_count > 65536 ||
        (s->namespaces != NULL && ((s->set_identity && s->namespaces->isolate_user) || s->namespaces->hidden == NULL ||
                                   s->namespaces->writable_count > APH_NAMESPACES_MAX_WRITABLE ||
                                   (s->namespaces->writable_count > 0 && s->namespaces->writable == NULL) ||
                                   s->namespaces->directory_count > 4 * APH_NAMESPACES_MAX_WRITABLE ||
                                   (s->namespaces->directory_count > 0 && s->namespaces->directories == NULL)))) {
        r->step = APH_STEP_INVALID;
        return EINVAL;
    }

    struct sock_fprog filter;
    const struct sock_fprog *filter_ptr = NULL;
    if (s->seccomp != NULL) {
        if (s->seccomp->instructions == NULL || s->seccomp->length == 0) {
            r->step = APH_STEP_INVALID;
            return EINVAL;
        }
        filter.len = s->seccomp->length;
        filter.filter = (struct sock_filter *)s->seccomp->instructions;
        filter_ptr = &filter;
    }

    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        r->step = APH_STEP_PIPE;
        return errno;
    }
    int e = aph_move_high(&report[0]);
    if (e == 0) e = aph_move_high(&report[1]);
    if (e != 0) {
        (void)close(report[0]);
        (void)close(report[1]);
        r->step = APH_STEP_PIPE;
        return e;
    }

    // The child's stack, with a guard page below it (stacks grow down on
    // every architecture Swift targets on Linux).
    long page_size = sysconf(_SC_PAGESIZE);
    size_t page = page_size > 0 ? (size_t)page_size : 4096;
    size_t stack_size = (APH_CHILD_STACK_SIZE + page - 1) / page * page;
    size_t map_size = stack_size + page;
    char *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) {
        int map_errno = errno;
        if (map != MAP_FAILED) (void)munmap(map, map_size);
        (void)close(report[0]);
        (void)close(report[1]);
        r->step = APH_STEP_CLONE;
        return map_errno;
    }
    char *stack_top = map + map_size;

    struct aph_child_args child_args = {
        .s = s,
        .filter = filter_ptr,
        .report_fd = report[1],
        .report_read_fd = report[0],
        .parent = getpid(),
        .lockdown = NULL,
        .pid_slots = NULL,
        .pid_slot_count = 0,
        .exec_path = s->path,
        .exec_argv = s->argv,
        .parent_pidfd = -1,
    };

    // The lockdown: the launch's path and argv copied to random addresses,
    // and the filter that allows execve with those two pointers only.
    struct aph_lockdown lockdown;
    struct sock_fprog lockdown_program;
    void *path_map = NULL, *argv_map = NULL;
    size_t path_map_size = 0, argv_map_size = 0;
    if (s->app_lockdown) {
        size_t path_size = strlen(s->path) + 1;
        size_t argc = 0;
        while (s->argv[argc] != NULL) argc++;
        size_t argv_size = (argc + 1) * sizeof(char *);
        char *path_copy = aph_random_region(path_size, page, &path_map, &path_map_size);
        char *argv_copy = path_copy == NULL ? NULL : aph_random_region(argv_size, page, &argv_map, &argv_map_size);
        int build = path_copy == NULL || argv_copy == NULL ? ENOMEM : aph_lockdown_build(&lockdown, path_copy, argv_copy);
        if (build != 0) {
            if (path_map != NULL) (void)munmap(path_map, path_map_size);
            if (argv_map != NULL) (void)munmap(argv_map, argv_map_size);
            (void)munmap(map, map_size);
            (void)close(report[0]);
            (void)close(report[1]);
            r->step = APH_STEP_LOCKDOWN;
            return build;
        }
        memcpy(path_copy, s->path, path_size);
        memcpy(argv_copy, s->argv, argv_size);
        lockdown_program.len = (unsigned short)lockdown.length;
        lockdown_program.filter = lockdown.code;
        child_args.lockdown = &lockdown_program;
        child_args.pid_slots = lockdown.pid_slots;
        child_args.pid_slot_count = lockdown.pid_slot_count;
        child_args.exec_path = path_copy;
        child_args.exec_argv = (char *const *)argv_copy;
    }

    // No handler of ours may run in the child, on our memory, before it has
    // reset the dispositions: block everything around the clone, glibc's
    // internal signals too (pthread_sigmask would leave those open), as
    // glibc's posix_spawn does.
    uint64_t all = ~(uint64_t)0, old = 0;
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, APH_KERNEL_SIGSET_SIZE, 0, 0);

    // vfork-style: the child shares our memory (no page-table copy) and this
    // thread sleeps until the child has exec'd or exited. The pidfd comes
    // back through parent_tid (clone(2) with CLONE_PIDFD, Linux 5.2).
    int pidfd = -1;
    int used_fallback = 0;
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
    if (s->namespaces != NULL && !s->namespaces->isolate_user) {
        flags |= CLONE_NEWNS | CLONE_NEWIPC;
    } else if (s->namespaces != NULL) {
        flags |= CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC;
        // Without it the child could not tell that the host died before its
        // parent-death signal was set (its getppid() is 0): it would run on.
        if (s->death_signal > 0) {
            long self = syscall(SYS_pidfd_open, getpid(), 0U);
            child_args.parent_pidfd = self < 0 ? -1 : (int)self;
        }
    }
    pid_t pid = clone(aph_child_entry, stack_top, flags | CLONE_PIDFD, &child_args,
                      &pidfd, NULL, NULL);
    int clone_errno = pid < 0 ? errno : 0;
    if (pid < 0 && (clone_errno == ENOSYS || clone_errno == EPERM || clone_errno == EINVAL)) {
        // A seccomp profile that refuses CLONE_PIDFD: clone without it, then
        // pidfd_open (the child cannot be reaped before that: we are its
        // only waiter).
        used_fallback = 1;
        pidfd = -1;
        pid = clone(aph_child_entry, stack_top, flags, &child_args, NULL, NULL, NULL);
        clone_errno = pid < 0 ? errno : 0;
    } else if (pid > 0 && pidfd < 0) {
        // A kernel before 5.2 ignores the flag (then pidfd_open, 5.3, fails
        // too, and we refuse a child we cannot track).
        used_fallback = 1;
    }
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, APH_KERNEL_SIGSET_SIZE, 0, 0);
    if (child_args.parent_pidfd >= 0) (void)close(child_args.parent_pidfd);
    // The child has exec'd or exited: nothing runs on its stack any more,
    // nor reads the copies of its path and argv.
    (void)munmap(map, map_size);
    if (path_map != NULL) (void)munmap(path_map, path_map_size);
    if (argv_map != NULL) (void)munmap(argv_map, argv_map_size);
    (void)close(report[1]);
    if (pid < 0) {
        (void)close(report[0]);
        r->step = APH_STEP_CLONE;
        return clone_errno;
    }

    if (used_fallback) {
        long fd = syscall(SYS_pidfd_open, pid, 0U);
        if (fd < 0) {
            int open_errno = errno;
            // Without a pidfd we cannot track it: kill and reap by pid.
            (void)kill(pid, SIGKILL);
            int status;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            (void)close(report[0]);
            r->step = APH_STEP_PIDFD_OPEN;
            return open_errno;
        }
        pidfd = (int)fd;
    }

    // CLONE_VFORK: the child has exec'd (past the point of no return) or
    // exited by now; the read waits at most for exec's close-on-exec step.
    // EOF: execve succeeded (the CLOEXEC write end closed). A report: the
    // child failed and exited.
    struct aph_child_report child_report;
    size_t got = 0;
    while (got < sizeof(child_report)) {
        ssize_t n = read(report[0], (char *)&child_report + got, sizeof(child_report) - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            int read_errno = errno;
            (void)close(report[0]);
            (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0U);
            aph_reap_blocking(pidfd);
            (void)close(pidfd);
            r->step = APH_STEP_REPORT;
            return read_errno;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    (void)close(report[0]);
    if (got == 0) {
        r->pid = pid;
        r->pidfd = pidfd;
        return 0;
    }
    aph_reap_blocking(pidfd);
    (void)close(pidfd);
    if (got != sizeof(child_report)) {
        r->step = APH_STEP_REPORT;
        return EIO;
    }
    r->step = child_report.step;
    r->detail = child_report.detail;
    return child_report.error != 0 ? child_report.error : EIO;
}

// MARK: - Namespaces probe

// What the probe's child reads and writes (in the parent's memory: CLONE_VM).
struct aph_probe_args {
    const struct aph_namespaces *namespaces;
    long stage;
    int error;
};

APH_CHILD_CODE
static int aph_probe_entry(void *arg) {
    struct aph_probe_args *p = (struct aph_probe_args *)arg;
    p->error = aph_enter_namespaces(p->namespaces, 0, -1, &p->stage);
    aph_child_exit(0);
}

int aph_namespaces_probe(const struct aph_namespaces *namespaces, int *stage_out) {
    if (stage_out == NULL) return EINVAL;
    *stage_out = APH_NS_STAGE_CLONE;
    if (namespaces == NULL || namespaces->hidden == NULL ||
        namespaces->writable_count > APH_NAMESPACES_MAX_WRITABLE ||
        namespaces->directory_count > 4 * APH_NAMESPACES_MAX_WRITABLE) return EINVAL;
    // vfork-style, as the spawn: the child runs on a stack of its own in this
    // memory, so no page table is copied (a fork of a large host stalled its
    // other threads on the copy and the copy-on-write faults after it), and
    // this thread sleeps until the child has exited. Raw syscalls only there.
    long page_size = sysconf(_SC_PAGESIZE);
    size_t page = page_size > 0 ? (size_t)page_size : 4096;
    size_t stack_size = (APH_CHILD_STACK_SIZE + page - 1) / page * page;
    size_t map_size = stack_size + page;
    char *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return errno;
    if (mprotect(map, page, PROT_NONE) != 0) {
        int e = errno;
        (void)munmap(map, map_size);
        return e;
    }
    struct aph_probe_args args = { namespaces, APH_NS_STAGE_CLONE, 0 };
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD |
                (namespaces->isolate_user ? CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC : CLONE_NEWNS | CLONE_NEWIPC);
    uint64_t all = ~(uint64_t)0, old = 0;
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, APH_KERNEL_SIGSET_SIZE, 0, 0);
    pid_t pid = clone(aph_probe_entry, map + map_size, flags, &args);
    int clone_errno = pid < 0 ? errno : 0;
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, APH_KERNEL_SIGSET_SIZE, 0, 0);
    (void)munmap(map, map_size);
    if (pid < 0) return clone_errno;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (args.error != 0) {
        *stage_out = (int)args.stage;
        return args.error;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EIO;
}

// MARK: - Covers in a running app's namespaces

int aph_namespace_cover(int pidfd, const char *const *cover, size_t cover_count,
                        const char *const *uncover, size_t uncover_count, int *results) {
    if (pidfd < 0 || results == NULL || cover_count > APH_NAMESPACES_MAX_COVERED ||
        uncover_count > APH_NAMESPACES_MAX_COVERED) return EINVAL;
    size_t n = cover_count + uncover_count;
    // The helper's answers: one int per path, then its own error.
    size_t bytes = (n + 1) * sizeof(int);
    int *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return errno;
    shared[n] = 0;
    // A fork, not the spawn's vfork-style clone: setns into a user namespace
    // asks for a caller that shares its memory with no one. Every signal
    // blocked around it; the child makes raw syscalls only, then exits.
    uint64_t all = ~(uint64_t)0, old = 0;
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, APH_KERNEL_SIGSET_SIZE, 0, 0);
    pid_t pid = fork();
    if (pid == 0) {
        long rc = APH_RAW2(SYS_setns, pidfd, CLONE_NEWUSER | CLONE_NEWNS);
        if (rc < 0) {
            shared[n] = (int)-rc;
            (void)APH_RAW1(SYS_exit_group, 1);
        }
        int e = aph_cover_files(cover, cover_count, shared);
        if (e != 0) {
            shared[n] = e;
            (void)APH_RAW1(SYS_exit_group, 1);
        }
        for (size_t i = 0; i < uncover_count; i++) {
            rc = APH_RAW2(SYS_umount2, uncover[i], APH_MNT_DETACH | APH_UMOUNT_NOFOLLOW);
            shared[cover_count + i] = rc < 0 ? (int)-rc : 0;
        }
        (void)APH_RAW1(SYS_exit_group, 0);
    }
    int fork_errno = pid < 0 ? errno : 0;
    (void)aph_raw6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, APH_KERNEL_SIGSET_SIZE, 0, 0);
    if (pid < 0) {
        (void)munmap(shared, bytes);
        return fork_errno;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    int error = shared[n];
    if (error == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) error = EIO;
    if (error == 0) {
        for (size_t i = 0; i < n; i++) results[i] = shared[i];
    }
    (void)munmap(shared, bytes);
    return error;
}

// MARK: - pidfd and wait

int aph_pidfd_open(pid_t pid, int *pidfd_out) {
    if (pidfd_out == NULL) return EINVAL;
    long fd = syscall(SYS_pidfd_open, pid, 0U);
    if (fd < 0) return errno;
    *pidfd_out = (int)fd;
    return 0;
}

int aph_pidfd_send_signal(int pidfd, int sig) {
    if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0U) != 0) return errno;
    return 0;
}

static void aph_fill_wait(const siginfo_t *info, struct aph_wait_result *out) {
    out->pid = info->si_pid;
    out->code = info->si_pid == 0 ? 0 : info->si_code;
    out->status = info->si_pid == 0 ? 0 : info->si_status;
}

int aph_waitid_pidfd(int pidfd, int options, struct aph_wait_result *out) {
    if (out == NULL) return EINVAL;
    siginfo_t info;
    for (;;) {
        memset(&info, 0, sizeof(info));
        if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &info, options) == 0) break;
        if (errno != EINTR) return errno;
    }
    aph_fill_wait(&info, out);
    return 0;
}

int aph_waitid_all(int options, struct aph_wait_result *out) {
    if (out == NULL) return EINVAL;
    siginfo_t info;
    for (;;) {
        memset(&info, 0, sizeof(info));
        if (waitid(P_ALL, 0, &info, options) == 0) break;
        if (errno != EINTR) return errno;
    }
    aph_fill_wait(&info, out);
    return 0;
}

// MARK: - epoll and eventfd

int aph_epoll_create(int *epfd_out) {
    if (epfd_out == NULL) return EINVAL;
    int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return errno;
    *epfd_out = fd;
    return 0;
}

int aph_epoll_add(int epfd, int fd, uint64_t key) {
    struct epoll_event event;
    memset(&event, 0, sizeof(event));
    event.events = EPOLLIN;
    event.data.u64 = key;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) != 0) return errno;
    return 0;
}

int aph_epoll_remove(int epfd, int fd) {
    if (epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) != 0) return errno;
    return 0;
}

int aph_epoll_add_oneshot(int epfd, int fd, uint64_t key, int rearm) {
    struct epoll_event event;
    memset(&event, 0, sizeof(event));
    event.events = EPOLLIN | EPOLLONESHOT;
    event.data.u64 = key;
    if (epoll_ctl(epfd, rearm ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) != 0) return errno;
    return 0;
}
int aph_epoll_wait(int epfd, uint64_t *keys, int capacity, int *count_out) {
    if (keys == NULL || count_out == NULL || capacity <= 0) return EINVAL;
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    *count_out = 0;
    int n = epoll_wait(epfd, events, capacity, -1);
    if (n < 0) return errno == EINTR ? 0 : errno;
    for (int i = 0; i < n; i++) keys[i] = events[i].data.u64;
    *count_out = n;
    return 0;
}

int aph_eventfd_create(int nonblocking, int *fd_out) {
    if (fd_out == NULL) return EINVAL;
    int fd = eventfd(0, EFD_CLOEXEC | (nonblocking ? EFD_NONBLOCK : 0));
    if (fd < 0) return errno;
    *fd_out = fd;
    return 0;
}

int aph_eventfd_signal(int fd) {
    uint64_t one = 1;
    for (;;) {
        ssize_t n = write(fd, &one, sizeof(one));
        if (n == (ssize_t)sizeof(one)) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? errno : EIO;
    }
}

int aph_timerfd_create(int *fd_out) {
    if (fd_out == NULL) return EINVAL;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0) return errno;
    *fd_out = fd;
    return 0;
}

int aph_timerfd_set(int fd, int64_t nanoseconds) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof(spec));
    if (nanoseconds > 0) {
        spec.it_value.tv_sec = (time_t)(nanoseconds / 1000000000LL);
        spec.it_value.tv_nsec = (long)(nanoseconds % 1000000000LL);
    }
    return timerfd_settime(fd, 0, &spec, NULL) == 0 ? 0 : errno;
}

int aph_timerfd_wait(int timer, int stop, int *fired_out) {
    if (fired_out == NULL) return EINVAL;
    *fired_out = 0;
    struct pollfd fds[2] = {{.fd = timer, .events = POLLIN}, {.fd = stop, .events = POLLIN}};
    int n = poll(fds, 2, -1);
    if (n < 0) return errno == EINTR ? 0 : errno;
    if (fds[1].revents) return 0;
    if (fds[0].revents & POLLIN) {
        uint64_t count;
        // Nonblocking: a disarm between poll and read leaves nothing to read (EAGAIN).
        if (read(timer, &count, sizeof(count)) == (ssize_t)sizeof(count)) *fired_out = 1;
    }
    return 0;
}

int aph_eventfd_drain(int fd) {
    uint64_t value;
    for (;;) {
        ssize_t n = read(fd, &value, sizeof(value));
        if (n == (ssize_t)sizeof(value)) return 0;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 0;
        return n < 0 ? errno : EIO;
    }
}

// MARK: - Descriptors

int aph_socketpair(int *fd0_out, int *fd1_out) {
    if (fd0_out == NULL || fd1_out == NULL) return EINVAL;
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return errno;
    *fd0_out = fds[0];
    *fd1_out = fds[1];
    return 0;
}

int aph_pipe(int *read_fd_out, int *write_fd_out) {
    if (read_fd_out == NULL || write_fd_out == NULL) return EINVAL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    *read_fd_out = fds[0];
    *write_fd_out = fds[1];
    return 0;
}

int aph_flock_exclusive_nonblocking(int fd) {
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EINTR) return errno;
    }
}

int aph_set_thread_name(const char *name) {
    if (name == NULL) return EINVAL;
    char truncated[16];
    strncpy(truncated, name, sizeof(truncated) - 1);
    truncated[sizeof(truncated) - 1] = 0;
    return pthread_setname_np(pthread_self(), truncated);
}

int aph_flock_unlock(int fd) {
    for (;;) {
        if (flock(fd, LOCK_UN) == 0) return 0;
        if (errno != EINTR) return errno;
    }
}

// MARK: - Raw syscall

int aph_syscall6(long number, long a0, long a1, long a2, long a3, long a4,
                 long a5, long *result_out) {
    errno = 0;
    long rc = syscall(number, a0, a1, a2, a3, a4, a5);
    int e = rc == -1 ? errno : 0;
    if (result_out) *result_out = rc;
    return e;
}

// MARK: - Write-behind

int aph_writeback_start(int fd, int64_t offset, int64_t length) {
    if (sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE) != 0) return errno;
    return 0;
}

int aph_writeback_wait(int fd, int64_t offset, int64_t length, int drop) {
    unsigned int flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
    if (sync_file_range(fd, (off64_t)offset, (off64_t)length, flags) != 0) return errno;
    if (drop) {
        int rc = posix_fadvise(fd, (off_t)offset, (off_t)length, POSIX_FADV_DONTNEED);
        if (rc != 0) return rc;
    }
    return 0;
}

int aph_o_direct_flag(void) { return O_DIRECT; }

int aph_open_beneath(int dirfd, const char *path, int flags, unsigned int mode, int *fd_out) {
    if (path == NULL || path[0] == '\0' || path[0] == '/') return EINVAL;
    size_t length = strlen(path);
    if (length >= PATH_MAX) return ENAMETOOLONG;
    char buffer[PATH_MAX];
    memcpy(buffer, path, length + 1);
    int current = dirfd;
    char *component = buffer;
    for (;;) {
        char *slash = strchr(component, '/');
        if (slash != NULL) *slash = '\0';
        if (component[0] == '\0' || strcmp(component, ".") == 0 || strcmp(component, "..") == 0) {
            if (current != dirfd) close(current);
            return component[0] == '\0' ? EINVAL : EACCES;
        }
        int next;
        if (slash == NULL) {
            do {
                next = openat(current, component, flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
            } while (next < 0 && errno == EINTR);
        } else {
            next = openat(current, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int error = errno;
        if (current != dirfd) close(current);
        if (next < 0) return error;
        if (slash == NULL) {
            *fd_out = next;
            return 0;
        }
        current = next;
        component = slash + 1;
    }
}

// MARK: - Run-loop stamp page

#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#endif
#ifndef F_SEAL_SEAL
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

int aph_stamp_page_create(int *fd_out, void **map_out) {
    if (fd_out == NULL || map_out == NULL) return EINVAL;
    int fd = memfd_create("apphost-runloop-stamp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return errno;
    int e = 0;
    if (ftruncate(fd, APH_STAMP_PAGE_SIZE) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        e = errno;
        (void)close(fd);
        return e;
    }
    void *map = mmap(NULL, APH_STAMP_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        e = errno;
        (void)close(fd);
        return e;
    }
    *fd_out = fd;
    *map_out = map;
    return 0;
}

int aph_malloc_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int aph_malloc_trim(void) {
    return malloc_trim(0);
}
