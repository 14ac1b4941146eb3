// The run-loop stamp page: what an app's main run loop writes and the host's
// foreground hang watchdog reads (issue 18). Shared by AppKitLess (the writer)
// and the host (the reader); nothing else of the host's is here.
//
// Layout (little-endian, the first 16 bytes of a page the host makes and
// hands the app as descriptor 4, APPHOST_STAMP_FD):
//   offset 0: turn   UInt64, incremented when a turn of the main run loop begins
//   offset 8: busy   UInt64, CLOCK_MONOTONIC nanoseconds at which the current
//                    turn began; 0 while the run loop waits for work
// The writer stores with release semantics, the reader loads with acquire.
// The reader trusts neither value: they are written by the app.
#ifndef APH_STAMP_H
#define APH_STAMP_H

#include <stddef.h>
#include <stdint.h>

/// Byte offsets of the two words.
#define APH_STAMP_TURN_OFFSET 0
#define APH_STAMP_BUSY_OFFSET 8

/// CLOCK_MONOTONIC in nanoseconds (the vDSO: no syscall). Never 0.
uint64_t aph_stamp_now(void);

/// A turn begins: turn += 1, then busy = now (release stores). Main thread only.
void aph_stamp_begin_turn(void *page);

/// The run loop is about to wait for work: busy = 0 (release store).
void aph_stamp_end_turn(void *page);

/// Reads turn and busy (acquire loads; turn again after busy, so a turn that
/// began in between reads as a new turn: `*consistent` is 0 then).
void aph_stamp_read(const void *page, uint64_t *turn_out, uint64_t *busy_out, int *consistent_out);

/// Maps `fd` (the page the host passed) shared and writable; 0 or an errno.
/// Checks the descriptor is a regular file (a memfd) of at least 16 bytes.
int aph_stamp_map_writable(int fd, void **map_out);

// Extended attributes, for the data-protection class of a file: AppKitLess sets
// it on the files an app writes, the host reads it (and keeps a closed file's
// owner in another) when the device locks. <sys/xattr.h> is not in Swift's Glibc
// module. Each returns 0 or an errno; the path is followed (the host passes
// /proc/self/fd/N of an O_PATH descriptor).
int aph_xattr_set(const char *path, const char *name, const void *value, size_t size);
/// Reads at most `capacity` bytes; `*length_out` is the value's length.
int aph_xattr_get(const char *path, const char *name, void *buffer, size_t capacity, size_t *length_out);
int aph_xattr_remove(const char *path, const char *name);

// An eventfd (close-on-exec, non-blocking) for AppKitLess's reader to be woken
// through (<sys/eventfd.h> is not in Swift's Glibc module): 0 or an errno.
int aph_wake_create(int *fd_out);

#endif
