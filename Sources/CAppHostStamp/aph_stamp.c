#include "aph_stamp.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/xattr.h>
#include <time.h>

uint64_t aph_stamp_now(void) {
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    return ns == 0 ? 1 : ns;
}

static uint64_t *aph_stamp_word(const void *page, unsigned offset) {
    return (uint64_t *)((char *)page + offset);
}

void aph_stamp_begin_turn(void *page) {
    uint64_t *turn = aph_stamp_word(page, APH_STAMP_TURN_OFFSET);
    uint64_t next = __atomic_load_n(turn, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(turn, next, __ATOMIC_RELEASE);
    __atomic_store_n(aph_stamp_word(page, APH_STAMP_BUSY_OFFSET), aph_stamp_now(), __ATOMIC_RELEASE);
}

void aph_stamp_end_turn(void *page) {
    __atomic_store_n(aph_stamp_word(page, APH_STAMP_BUSY_OFFSET), 0, __ATOMIC_RELEASE);
}

void aph_stamp_read(const void *page, uint64_t *turn_out, uint64_t *busy_out, int *consistent_out) {
    uint64_t turn = __atomic_load_n(aph_stamp_word(page, APH_STAMP_TURN_OFFSET), __ATOMIC_ACQUIRE);
    uint64_t busy = __atomic_load_n(aph_stamp_word(page, APH_STAMP_BUSY_OFFSET), __ATOMIC_ACQUIRE);
    uint64_t again = __atomic_load_n(aph_stamp_word(page, APH_STAMP_TURN_OFFSET), __ATOMIC_ACQUIRE);
    *turn_out = again;
    *busy_out = busy;
    *consistent_out = turn == again;
}

int aph_stamp_map_writable(int fd, void **map_out) {
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    if (!S_ISREG(st.st_mode) || st.st_size < 16) return EINVAL;
    void *map = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return errno;
    *map_out = map;
    return 0;
}

int aph_xattr_set(const char *path, const char *name, const void *value, size_t size) {
    return setxattr(path, name, value, size, 0) == 0 ? 0 : errno;
}

int aph_xattr_get(const char *path, const char *name, void *buffer, size_t capacity, size_t *length_out) {
    ssize_t n = getxattr(path, name, buffer, capacity);
    if (n < 0) return errno;
    *length_out = (size_t)n;
    return 0;
}

int aph_xattr_remove(const char *path, const char *name) {
    return removexattr(path, name) == 0 ? 0 : errno;
}

int aph_wake_create(int *fd_out) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return errno;
    *fd_out = fd;
    return 0;
}
