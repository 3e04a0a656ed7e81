#define _GNU_SOURCE
#include "CSharedCacheSupport.h"

#include <errno.h>

#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif

// posix_spawn(3) is prohibited on iOS, tvOS and watchOS; only the tools start processes, and
// they run on macOS and Linux.
#if !defined(__APPLE__) || TARGET_OS_OSX
#define SCS_CAN_SPAWN 1
#endif

#if defined(SCS_CAN_SPAWN)
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <features.h>
#if __GLIBC_PREREQ(2, 34)
#define SCS_HAS_ADDCLOSEFROM 1
#endif
#endif

/// Closes every descriptor from 3 up in the child, after the standard ones are in place.
/// `inherited` says which of 0-2 the child keeps as this process has them.
static int close_the_rest(posix_spawn_file_actions_t *actions, short *flags, const int inherited[3]) {
#if defined(__APPLE__)
    // Only what the file actions name is inherited, standard streams included: name those kept.
    *flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
    for (int target = 0; target < 3; target++) {
        if (!inherited[target]) continue;
        int error = posix_spawn_file_actions_addinherit_np(actions, target);
        if (error != 0) return error;
    }
    return 0;
#elif defined(SCS_HAS_ADDCLOSEFROM)
    (void)flags; (void)inherited;
    return posix_spawn_file_actions_addclosefrom_np(actions, 3);
#else
    // glibc ignores EBADF from a close action, so closing unopened descriptors costs nothing but
    // the list; the bound keeps it short when the limit is huge.
    (void)flags; (void)inherited;
    long limit = sysconf(_SC_OPEN_MAX);
    if (limit < 0 || limit > 65536) limit = 65536;
    for (int fd = 3; fd < limit; fd++) {
        int error = posix_spawn_file_actions_addclose(actions, fd);
        if (error != 0) return error;
    }
    return 0;
#endif
}

int scs_spawn(int *pid, const char *path, char *const arguments[], char *const environment[],
              int input, int output, int error_output) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int error = posix_spawn_file_actions_init(&actions);
    if (error != 0) return error;
    error = posix_spawnattr_init(&attributes);
    if (error != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return error;
    }
    // The child starts as if from a fresh shell: no signal blocked, and every signal's action
    // the default, not one this process ignores (a tool ignores SIGTERM on Darwin to route it
    // to a dispatch source; a child inheriting that could not be stopped).
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    sigset_t nothing_blocked, every_signal;
    sigemptyset(&nothing_blocked);
    sigfillset(&every_signal);
    sigdelset(&every_signal, SIGKILL);
    sigdelset(&every_signal, SIGSTOP);
    // In order: standard error may name 1, which must already be the child's standard output.
    const int sources[3] = {input, output, error_output};
    const int inherited[3] = {input < 0, output < 0, error_output < 0};
    for (int target = 0; target < 3 && error == 0; target++) {
        if (sources[target] >= 0) error = posix_spawn_file_actions_adddup2(&actions, sources[target], target);
    }
    if (error == 0) error = close_the_rest(&actions, &flags, inherited);
    if (error == 0) error = posix_spawnattr_setsigmask(&attributes, &nothing_blocked);
    if (error == 0) error = posix_spawnattr_setsigdefault(&attributes, &every_signal);
    if (error == 0) error = posix_spawnattr_setflags(&attributes, flags);
    if (error == 0) {
        pid_t child = 0;
        error = posix_spawn(&child, path, &actions, &attributes, arguments, environment);
        if (error == 0) *pid = (int)child;
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return error;
}

#else

int scs_spawn(int *pid, const char *path, char *const arguments[], char *const environment[],
              int input, int output, int error_output) {
    (void)pid; (void)path; (void)arguments; (void)environment;
    (void)input; (void)output; (void)error_output;
    return ENOSYS;
}

#endif
