// Copies out of a file mapping that survive the file being cut short under them.
//
// Touching a mapped page wholly past the end of its file raises SIGBUS, and so does a read
// error while the kernel pages it in. Where a pread would have returned a short count or EIO,
// a copy from a mapping would kill the process. So a SIGBUS handler, installed the first time
// it is needed, turns a fault inside a guarded copy back into a return value, and passes every
// other SIGBUS to whatever would have handled it without us. (The JVM does the same for its
// mapped buffers.) Linux only: nobody can test Darwin's Mach exceptions here.

#define _GNU_SOURCE
#include "CSharedCacheSupport.h"

#if defined(__linux__)
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

/// The copy in progress on this thread: where to resume, and the bytes whose fault it owns.
struct guard {
    sigjmp_buf resume;
    const char *start;
    const char *end;
};

// Initial-exec: a plain thread-pointer load in the handler, which must not call into the
// dynamic loader (a fault may come from inside malloc) even where this is a shared library.
static _Thread_local struct guard *volatile active_guard __attribute__((tls_model("initial-exec")));
static struct sigaction previous_action;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int installed;

static void reset_to_default(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, NULL);
}

static void on_bus_error(int number, siginfo_t *info, void *context) {
    struct guard *guard = active_guard;
    const char *address = info->si_addr;
    // si_code > 0: raised by a fault, not sent by kill(2) or sigqueue(3).
    if (guard != NULL && info->si_code > 0 && address >= guard->start && address < guard->end) {
        active_guard = NULL;
        siglongjmp(guard->resume, 1);
    }
    if (previous_action.sa_flags & SA_SIGINFO) {
        previous_action.sa_sigaction(number, info, context);
    } else if (previous_action.sa_handler == SIG_IGN && info->si_code <= 0) {
        // A sent SIGBUS the process ignored: still ignored.
    } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
        previous_action.sa_handler(number);
    } else {
        // The default action, as without us: a fault happens again on return and now ends the
        // process (the kernel does that to an ignored fault too); a sent signal is sent again,
        // delivered once this handler returns.
        reset_to_default();
        if (info->si_code <= 0) raise(SIGBUS);
    }
}

static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    installed = sigaction(SIGBUS, &action, &previous_action) == 0;
}

int scs_guarded_copy_is_available(void) {
    pthread_once(&install_once, install);
    if (!installed) return 0;
    // Someone may have put their own handler in ours' place since.
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0) return 0;
    return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_bus_error;
}

int scs_guarded_copy(void *destination, const void *source, size_t count) {
    pthread_once(&install_once, install);
    if (!installed) return -1;
    struct guard guard;
    guard.start = source;
    guard.end = (const char *)source + count;
    // The mask is not saved (that would cost a system call per copy); a fault leaves SIGBUS
    // blocked, as handlers run with their signal blocked, so it is unblocked here.
    if (sigsetjmp(guard.resume, 0) != 0) {
        sigset_t bus;
        sigemptyset(&bus);
        sigaddset(&bus, SIGBUS);
        pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
        return 1;
    }
    active_guard = &guard;
    // Keep the compiler from moving the copy's loads out from between the two stores.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(destination, source, count);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    active_guard = NULL;
    return 0;
}

#else

int scs_guarded_copy_is_available(void) { return 0; }

int scs_guarded_copy(void *destination, const void *source, size_t count) {
    (void)destination;
    (void)source;
    (void)count;
    return -1;
}

#endif
