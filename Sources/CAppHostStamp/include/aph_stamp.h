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

#endif
