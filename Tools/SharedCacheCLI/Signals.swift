#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unblocks every signal. A process inherits its parent's signal mask, and a parent that spawned
/// us from a libdispatch thread (test runners, Foundation's Process) can leave SIGTERM blocked,
/// which would make the tool impossible to stop. Call first thing in `main`.
package func resetSignalMask() {
    var none = sigset_t()
    sigemptyset(&none)
    sigprocmask(SIG_SETMASK, &none, nil)
}

/// Prepares `signals` for `DispatchSource.makeSignalSource`, before the process starts any
/// thread (threads inherit the mask).
///
/// On Linux, libdispatch reads signals from a signalfd, which sees a signal only if every
/// thread blocks it: an unblocked thread would take it first. On Darwin, kqueue's
/// EVFILT_SIGNAL sees signals whatever the mask, and they are set to be ignored so that their
/// default action does not end the process first.
package func routeSignalsToDispatch(_ signals: [Int32]) {
    #if os(Linux)
    var set = sigset_t()
    sigemptyset(&set)
    for number in signals { sigaddset(&set, number) }
    pthread_sigmask(SIG_BLOCK, &set, nil)
    #else
    for number in signals { signal(number, SIG_IGN) }
    #endif
}
