#include "CSharedCacheSupport.h"

#include <errno.h>

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
