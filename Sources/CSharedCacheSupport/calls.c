#define _GNU_SOURCE
#include "CSharedCacheSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int scs_rename_noreplace(int from_dir, const char *from, int to_dir, const char *to) {
#if defined(__linux__) && defined(RENAME_NOREPLACE)
    return renameat2(from_dir, from, to_dir, to, RENAME_NOREPLACE);
#else
    (void)from_dir; (void)from; (void)to_dir; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

int scs_pipe_cloexec(int ends[2]) {
#if defined(__linux__)
    return pipe2(ends, O_CLOEXEC | O_NONBLOCK);
#else
    (void)ends;
    errno = ENOSYS;
    return -1;
#endif
}

int scs_no_access_time_flag(void) {
#if defined(__linux__) && defined(O_NOATIME)
    return O_NOATIME;
#else
    return 0;
#endif
}
