// Copies out of a file mapping that survive the file being cut short under them.
//
// Touching a mapped page wholly past the end of its file raises SIGBUS, and so does a read error
// while the kernel pages it in. Where a pread would have returned a short count or EIO, a copy
// from a mapping would kill the process. So a SIGBUS handler, installed the first time it is
// needed, turns a fault inside a guarded copy back into a return value, and hands every other
// SIGBUS to whatever would have handled it without us, as the kernel would have. (The JVM does
// the same for its mapped buffers.) The same handler keeps the counters' shared mapping from
// ending the process when their file is cut short: it puts zeros in the mapping's place.
// Linux only: nobody can test Darwin's Mach exceptions here.

#define _GNU_SOURCE
#include "CSharedCacheSupport.h"

#if defined(__linux__)
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

/// The copy in progress on this thread: where to resume, the bytes whose fault it owns, and the
/// copy it interrupted (a signal handler's own guarded copy), if any.
struct guard {
    sigjmp_buf resume;
    const char *start;
    const char *end;
    struct guard *outer;
};

// Initial-exec: a plain thread-pointer load in the handler, which must not call into the
// dynamic loader (a fault may come from inside malloc) even where this is a shared library.
static _Thread_local struct guard *volatile active_guard __attribute__((tls_model("initial-exec")));
/// Whether this thread was seen not to block SIGBUS. Read once a thread: asking again at every
/// copy is a system call, 15 % of a 1 KB get. A thread that blocks SIGBUS blocks it from its
/// start (it inherits the mask of one that blocks everything), and is asked at every copy, in
/// case it stops; one that starts blocking it after its first copy is not seen, and a fault
/// would end the process, as it does any program that reads a mapping. Nor is a copy made in a
/// signal handler that blocks SIGBUS (a get takes locks and allocates: no call to make in a
/// handler). A SIGBUS passed on to another handler has the thread asked again at its next
/// copy: that handler may leave SIGBUS blocked, if it leaves by a longjmp.
static _Thread_local int sees_faults __attribute__((tls_model("initial-exec")));
static struct sigaction previous_action;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
/// Whether our handler is in place: set once installed, cleared if the handler is reset.
static int installed;

/// The default action from now on, as the kernel makes it for a handler with SA_RESETHAND and
/// for a fault the process ignores; copies are no longer guarded.
static void reset_to_default(void) {
    __atomic_store_n(&installed, 0, __ATOMIC_SEQ_CST);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, NULL);
}

/// Whether returning from a handler makes this SIGBUS happen again: a synchronous fault does;
/// a signal sent by kill(2) or sigqueue(3) (si_code <= 0), or an asynchronous memory error
/// report, does not.
static int recurs(const siginfo_t *info) {
#ifdef BUS_MCEERR_AO
    if (info->si_code == BUS_MCEERR_AO) return 0;
#endif
    return info->si_code > 0;
}

/// Hands a SIGBUS that is not ours to the previous disposition, as the kernel would have: the
/// default action, ignoring it, or its handler under its own mask and flags.
static void pass_on(int number, siginfo_t *info, void *context) {
    sees_faults = 0;
    struct sigaction previous = previous_action;
    if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        if (previous.sa_handler == SIG_IGN && !recurs(info)) return;  // still ignored
        // A fault happens again on return and now ends the process (as the kernel does to an
        // ignored fault too); anything else is raised again, delivered once we return.
        reset_to_default();
        if (!recurs(info)) raise(SIGBUS);
        return;
    }
    // The mask the kernel would have set for that handler: the interrupted code's, its sa_mask,
    // and SIGBUS itself unless SA_NODEFER. (Restored from the context when we return.)
    sigset_t mask = ((ucontext_t *)context)->uc_sigmask;
    sigorset(&mask, &mask, &previous.sa_mask);
    if (previous.sa_flags & SA_NODEFER) {
        sigdelset(&mask, SIGBUS);
    } else {
        sigaddset(&mask, SIGBUS);
    }
    if (previous.sa_flags & SA_RESETHAND) reset_to_default();
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(number, info, context);
    } else {
        previous.sa_handler(number);
    }
}

/// Shared mappings of small files that every process writes in place (the counters), guarded
/// for their whole life rather than a copy at a time: the file cut short under one, a fault in
/// it puts private zeros in its place and marks it lost, and the instruction that faulted runs
/// again on them. Slots are claimed and freed with atomics, as the handler reads them.
#define LOSABLE_LIMIT 256
static struct losable {
    int claimed;
    char *start;  // NULL until the slot is filled in
    size_t size;
    int lost;
} losable[LOSABLE_LIMIT];

/// Whether the fault at `address` was in a losable mapping, now replaced by zeros.
static int replace_lost_mapping(const char *address) {
    for (int slot = 0; slot < LOSABLE_LIMIT; slot++) {
        char *start = __atomic_load_n(&losable[slot].start, __ATOMIC_ACQUIRE);
        size_t size = __atomic_load_n(&losable[slot].size, __ATOMIC_RELAXED);
        if (start == NULL || address < start || address >= start + size) continue;
        // mmap is a plain system call on Linux, safe in a handler (unlike malloc).
        void *zeros = mmap(start, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (zeros != start) return 0;
        __atomic_store_n(&losable[slot].lost, 1, __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

static void on_bus_error(int number, siginfo_t *info, void *context) {
    struct guard *guard = active_guard;
    const char *address = info->si_addr;
    if (guard != NULL && recurs(info) && address >= guard->start && address < guard->end) {
        active_guard = guard->outer;
        siglongjmp(guard->resume, 1);
    }
    if (recurs(info) && replace_lost_mapping(address)) return;
    pass_on(number, info, context);
}

static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &previous_action) == 0) __atomic_store_n(&installed, 1, __ATOMIC_SEQ_CST);
}

int scs_guarded_copy_is_available(void) {
    pthread_once(&install_once, install);
    if (!__atomic_load_n(&installed, __ATOMIC_SEQ_CST)) return 0;
    // Someone may have put their own handler in ours' place since.
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0) return 0;
    return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_bus_error;
}

int scs_guard_losable_mapping(void *start, size_t size) {
    if (!scs_guarded_copy_is_available()) return -1;
    for (int slot = 0; slot < LOSABLE_LIMIT; slot++) {
        int unclaimed = 0;
        if (!__atomic_compare_exchange_n(&losable[slot].claimed, &unclaimed, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            continue;
        }
        // The handler looks at a slot once its start is set, so that goes last.
        __atomic_store_n(&losable[slot].size, size, __ATOMIC_RELAXED);
        __atomic_store_n(&losable[slot].lost, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&losable[slot].start, (char *)start, __ATOMIC_RELEASE);
        return slot;
    }
    return -1;
}

int scs_losable_mapping_was_lost(int slot) {
    return slot >= 0 && slot < LOSABLE_LIMIT && __atomic_load_n(&losable[slot].lost, __ATOMIC_ACQUIRE);
}

void scs_unguard_losable_mapping(int slot) {
    if (slot < 0 || slot >= LOSABLE_LIMIT) return;
    __atomic_store_n(&losable[slot].start, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&losable[slot].claimed, 0, __ATOMIC_RELEASE);
}

int scs_guarded_copy(const void *source, void *first, size_t first_count, void *second, size_t second_count) {
    pthread_once(&install_once, install);
    if (!__atomic_load_n(&installed, __ATOMIC_SEQ_CST)) return -1;
    // A fault while this thread blocks SIGBUS is never delivered: the kernel ends the process.
    if (!sees_faults) {
        sigset_t blocked;
        if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) != 0 || sigismember(&blocked, SIGBUS)) return -1;
        sees_faults = 1;
    }
    struct guard guard;
    guard.start = source;
    guard.end = (const char *)source + first_count + second_count;
    guard.outer = active_guard;
    // The mask is not saved (that would cost a system call per copy): a fault leaves SIGBUS
    // blocked, as a handler runs with its signal blocked, so it is unblocked here; it was not
    // blocked before (as this thread's first copy found, and nothing since blocked it).
    if (sigsetjmp(guard.resume, 0) != 0) {
        sigset_t bus;
        sigemptyset(&bus);
        sigaddset(&bus, SIGBUS);
        pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
        return 1;
    }
    active_guard = &guard;
    // Keep the compiler from moving the copies' loads out from between the two stores.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(first, source, first_count);
    memcpy(second, (const char *)source + first_count, second_count);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    active_guard = guard.outer;
    return 0;
}

#else

int scs_guarded_copy_is_available(void) { return 0; }

int scs_guard_losable_mapping(void *start, size_t size) {
    (void)start;
    (void)size;
    return -1;
}

int scs_losable_mapping_was_lost(int slot) {
    (void)slot;
    return 0;
}

void scs_unguard_losable_mapping(int slot) { (void)slot; }

int scs_guarded_copy(const void *source, void *first, size_t first_count, void *second, size_t second_count) {
    (void)source;
    (void)first;
    (void)first_count;
    (void)second;
    (void)second_count;
    return -1;
}

#endif
