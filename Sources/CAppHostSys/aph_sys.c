// aph_sys.c — see include/aph_sys.h.
//
// Rule for everything under "child": after clone the child runs only
// async-signal-safe libc wrappers around single syscalls (no malloc, no
// libseccomp, no locks) and leaves through execve or _exit.
#define _GNU_SOURCE 1

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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
#ifndef SYS_clone3
#define SYS_clone3 435
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

// The kernel's struct clone_args (CLONE_ARGS_SIZE_VER0 = 64 bytes). Declared
// here because glibc 2.36 does not export it and <linux/sched.h> clashes with
// <sched.h>.
struct aph_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
};

// MARK: - Seccomp

// Kernel-wide or cross-process powers no app needs: tracing, namespaces and
// mounts (old and new mount API), BPF and perf, modules and kexec, reboot,
// the kernel keyring, other processes' memory, swap, clock setting.
static const char *const aph_baseline_names[] = {
    "ptrace", "mount", "umount2", "unshare", "setns", "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "keyctl", "add_key", "request_key",
    "process_vm_readv", "process_vm_writev", "pivot_root", "swapon", "swapoff",
    "open_by_handle_at", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "quotactl", "acct", "settimeofday",
    "clock_settime", "iopl", "ioperm",
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
    out->instructions = NULL;
    out->length = 0;

    int deny_errno = s->deny_errno > 0 ? s->deny_errno : EPERM;
    uint32_t deny = SCMP_ACT_ERRNO((uint32_t)deny_errno);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) return ENOMEM;

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
    for (size_t i = 0; i < s->extra_denied_count && rc == 0; i++) {
        rc = seccomp_rule_add(ctx, deny, s->extra_denied[i], 0);
    }
    if (rc == 0 && s->deny_namespace_clone) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
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

// MARK: - Spawn: child side

struct aph_child_report {
    int32_t step;
    int32_t error;
    int32_t detail;
};

__attribute__((noreturn))
static void aph_child_fail(int report_fd, int step, int error, int detail) {
    struct aph_child_report report = { step, error, detail };
    ssize_t n;
    do {
        n = write(report_fd, &report, sizeof(report));
    } while (n < 0 && errno == EINTR);
    _exit(127);
}

// The layout getdents64 writes.
struct aph_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

// Closes every descriptor >= first except `keep`, without close_range.
static int aph_close_fallback(int first, int keep) {
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        // No /proc: close by number up to the soft limit (capped).
        struct rlimit rl;
        long max = 65536;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (long)rl.rlim_cur < max) {
            max = (long)rl.rlim_cur;
        }
        for (long fd = first; fd < max; fd++) {
            if (fd != keep) (void)close((int)fd);
        }
        return 0;
    }
    char buffer[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buffer, sizeof(buffer));
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            (void)close(dfd);
            return e;
        }
        if (n == 0) break;
        for (long offset = 0; offset < n;) {
            struct aph_dirent64 *entry = (struct aph_dirent64 *)(buffer + offset);
            offset += entry->d_reclen;
            const char *p = entry->d_name;
            if (*p < '0' || *p > '9') continue;
            long fd = 0;
            for (; *p >= '0' && *p <= '9'; p++) fd = fd * 10 + (*p - '0');
            if (fd >= first && fd != keep && fd != dfd) (void)close((int)fd);
        }
    }
    (void)close(dfd);
    return 0;
}

// Closes every descriptor >= first except `keep` (keep >= first).
static int aph_close_from(int first, int keep) {
    if (keep > first &&
        syscall(SYS_close_range, (unsigned int)first, (unsigned int)(keep - 1), 0U) != 0) {
        return aph_close_fallback(first, keep);
    }
    if (syscall(SYS_close_range, (unsigned int)(keep + 1), ~0U, 0U) != 0) {
        return aph_close_fallback(first, keep);
    }
    return 0;
}

// The kernel's struct sigaction for rt_sigaction (not glibc's).
struct aph_kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

__attribute__((noreturn))
static void aph_child(const struct aph_spawn_settings *s,
                      const struct sock_fprog *filter,
                      int report_fd, pid_t parent) {
    // 1. Signals: default dispositions, empty mask. The raw syscall also
    //    resets glibc's internal signals 32 and 33, which its sigaction()
    //    refuses and which an ignored disposition would carry across execve.
    //    (SIGKILL/SIGSTOP cannot change.)
    struct aph_kernel_sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        (void)syscall(SYS_rt_sigaction, sig, &sa, NULL, sizeof(sa.mask));
    }
    sigset_t empty;
    sigemptyset(&empty);
    if (sigprocmask(SIG_SETMASK, &empty, NULL) != 0) {
        aph_child_fail(report_fd, APH_STEP_SIGNALS, errno, 0);
    }

    // 2. A new session (and process group).
    if (setsid() < 0) aph_child_fail(report_fd, APH_STEP_SETSID, errno, 0);

    // 3. Die with the parent (thread). If the parent already died, PDEATHSIG
    //    will never fire: stop here.
    if (s->death_signal > 0) {
        if (prctl(PR_SET_PDEATHSIG, (unsigned long)s->death_signal, 0UL, 0UL, 0UL) != 0) {
            aph_child_fail(report_fd, APH_STEP_DEATH_SIGNAL, errno, 0);
        }
        if (getppid() != parent) aph_child_fail(report_fd, APH_STEP_PARENT_EXITED, ESRCH, 0);
    }

    // 4. No privilege gain through execve (also required for seccomp).
    if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) != 0) {
        aph_child_fail(report_fd, APH_STEP_NO_NEW_PRIVS, errno, 0);
    }

    // 5. Descriptors. Copy every source above 3 first so installing one can
    //    not clobber another; the copies are CLOEXEC and go away below.
    int sources[4] = { s->stdin_fd, s->stdout_fd, s->stderr_fd, s->ipc_fd };
    int high[4] = { -1, -1, -1, -1 };
    int dev_null = -1;
    for (int target = 0; target < 4; target++) {
        int source = sources[target];
        if (source < 0) {
            if (target == APH_IPC_FD) continue;
            if (dev_null < 0) {
                int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (fd < 0) aph_child_fail(report_fd, APH_STEP_DEV_NULL, errno, target);
                dev_null = fcntl(fd, F_DUPFD_CLOEXEC, 4);
                if (dev_null < 0) aph_child_fail(report_fd, APH_STEP_DEV_NULL, errno, target);
                if (fd != dev_null) (void)close(fd);
            }
            high[target] = dev_null;
        } else {
            high[target] = fcntl(source, F_DUPFD_CLOEXEC, 4);
            if (high[target] < 0) aph_child_fail(report_fd, APH_STEP_DUP, errno, target);
        }
    }
    for (int target = 0; target < 4; target++) {
        if (high[target] < 0) continue;
        if (dup2(high[target], target) < 0) aph_child_fail(report_fd, APH_STEP_DUP, errno, target);
    }
    // Without an IPC descriptor fd 3 is closed too.
    int first_closed = sources[APH_IPC_FD] >= 0 ? APH_IPC_FD + 1 : APH_IPC_FD;
    int e = aph_close_from(first_closed, report_fd);
    if (e != 0) aph_child_fail(report_fd, APH_STEP_CLOSE_FDS, e, 0);

    // 6. Working directory.
    if (s->working_directory != NULL && chdir(s->working_directory) != 0) {
        aph_child_fail(report_fd, APH_STEP_CHDIR, errno, 0);
    }

    // 7. Resource limits.
    for (size_t i = 0; i < s->rlimit_count; i++) {
        struct rlimit rl;
        rl.rlim_cur = s->rlimits[i].soft == UINT64_MAX ? RLIM_INFINITY : (rlim_t)s->rlimits[i].soft;
        rl.rlim_max = s->rlimits[i].hard == UINT64_MAX ? RLIM_INFINITY : (rlim_t)s->rlimits[i].hard;
        if (setrlimit((__rlimit_resource_t)s->rlimits[i].resource, &rl) != 0) {
            aph_child_fail(report_fd, APH_STEP_RLIMIT, errno, (int)i);
        }
    }

    // 8. Seccomp last: everything above may use any syscall.
    if (filter != NULL &&
        prctl(PR_SET_SECCOMP, (unsigned long)SECCOMP_MODE_FILTER, (unsigned long)filter, 0UL, 0UL) != 0) {
        aph_child_fail(report_fd, APH_STEP_SECCOMP, errno, 0);
    }

    execve(s->path, s->argv, s->envp);
    aph_child_fail(report_fd, APH_STEP_EXEC, errno, 0);
}

// MARK: - Spawn: parent side

// Moves *fd to a number >= 4 (keeps CLOEXEC) so the child's dup2 onto 0..3
// never hits it.
static int aph_move_high(int *fd) {
    if (*fd >= 4) return 0;
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 4);
    if (moved < 0) return errno;
    (void)close(*fd);
    *fd = moved;
    return 0;
}

static void aph_reap_blocking(int pidfd) {
    siginfo_t info;
    while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &info, WEXITED) != 0 && errno == EINTR) {}
}

int aph_spawn(const struct aph_spawn_settings *s, struct aph_spawn_result *r) {
    if (r == NULL) return EINVAL;
    r->pid = -1;
    r->pidfd = -1;
    r->step = APH_STEP_NONE;
    r->detail = 0;
    if (s == NULL || s->path == NULL || s->argv == NULL || s->envp == NULL ||
        (s->rlimit_count > 0 && s->rlimits == NULL)) {
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

    pid_t parent = getpid();
    // No signal handler of ours may run in the child between clone and the
    // reset of dispositions: block everything around the clone.
    sigset_t all, old;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);

    int pidfd = -1;
    struct aph_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    args.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &args, sizeof(args));
    int used_fallback = 0;
    if (pid < 0 && (errno == ENOSYS || errno == EPERM || errno == E2BIG || errno == EINVAL)) {
        // Old kernel or a seccomp profile without clone3: plain clone, then
        // pidfd_open (the child cannot be reaped before that: we are its
        // only waiter).
        used_fallback = 1;
        pid = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
    }
    if (pid == 0) {
        (void)close(report[0]);
        aph_child(s, filter_ptr, report[1], parent);
    }
    int clone_errno = errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    (void)close(report[1]);
    if (pid < 0) {
        (void)close(report[0]);
        r->step = APH_STEP_CLONE;
        return clone_errno;
    }

    if (used_fallback) {
        long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0U);
        if (fd < 0) {
            int open_errno = errno;
            // Without a pidfd we cannot track it: kill and reap by pid.
            (void)kill((pid_t)pid, SIGKILL);
            int status;
            while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR) {}
            (void)close(report[0]);
            r->step = APH_STEP_PIDFD_OPEN;
            return open_errno;
        }
        pidfd = (int)fd;
    }

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
        r->pid = (pid_t)pid;
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
