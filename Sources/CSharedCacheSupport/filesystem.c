#define _GNU_SOURCE
#include "CSharedCacheSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#if defined(__linux__)
#include <sys/vfs.h>
#endif

int64_t scs_filesystem_magic(int fd) {
#if defined(__linux__)
    struct statfs result;
    if (fstatfs(fd, &result) != 0) return -1;
    return (int64_t)(uint64_t)(unsigned long)result.f_type;
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}

int scs_size_and_links(int fd, int64_t *size, uint64_t *links) {
#if defined(__linux__) && defined(STATX_SIZE)
    // Not fstat: it also reports the file's times, and since Linux 6.13 (multigrain time
    // stamps) a file whose change time was read gets a fine-grained one at its next write,
    // which dirties its inode in the filesystem's journal even within one tick of the coarse
    // clock: in C, a put's system calls took 5.3 µs with fstat and 3.8 µs with this.
    struct statx result;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_SIZE | STATX_NLINK, &result) == 0) {
        if ((result.stx_mask & (STATX_SIZE | STATX_NLINK)) == (STATX_SIZE | STATX_NLINK)) {
            *size = (int64_t)result.stx_size;
            *links = result.stx_nlink;
            return 0;
        }
    } else if (errno != ENOSYS && errno != EPERM && errno != EINVAL) {
        // ENOSYS: a kernel before 4.11; EPERM: a container whose seccomp filter predates statx
        // (as libuv and swift-corelibs-foundation found); EINVAL: a filesystem that refuses it.
        return -1;
    }
#endif
    struct stat status;
    if (fstat(fd, &status) != 0) return -1;
    *size = (int64_t)status.st_size;
    *links = (uint64_t)status.st_nlink;
    return 0;
}
