#if canImport(Darwin)
import Darwin
private let streamSocket = SOCK_STREAM
private let sendFlags: Int32 = 0
#elseif canImport(Glibc)
import Glibc
private let streamSocket = Int32(SOCK_STREAM.rawValue)
private let sendFlags = Int32(MSG_NOSIGNAL)
#elseif canImport(Musl)
import Musl
private let streamSocket = SOCK_STREAM
private let sendFlags = MSG_NOSIGNAL
#endif

/// A connected TCP socket, owned like a file descriptor: for the one place that speaks HTTP
/// without URLSession (a response whose content coding libcurl refuses).
///
/// Blocking, with send and receive timeouts; never raises SIGPIPE.
package struct StreamSocket: ~Copyable {
    private let descriptor: FileDescriptor

    /// Resolves `host` and connects to the first address that answers.
    ///
    /// - Throws: ``SystemError`` of `"getaddrinfo"` (errno `EHOSTUNREACH`) when the name does
    ///   not resolve, of `"connect"` when no address accepts.
    package init(connectingTo host: String, port: Int, timeout: Duration) throws(SystemError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocket
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, "\(port)", &hints, &list) == 0, let first = list else {
            throw SystemError("getaddrinfo", errno: EHOSTUNREACH, path: host)
        }
        defer { freeaddrinfo(list) }
        var seconds = timeval(tv_sec: max(1, Int(timeout.components.seconds)), tv_usec: 0)
        var lastError = SystemError("connect", errno: ECONNREFUSED, path: host)
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            let socket: FileDescriptor
            do {
                socket = FileDescriptor(
                    owning: try retryingInterrupts("socket") {
                        System_socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
                    })
            } catch {
                lastError = error
                continue
            }
            _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
            #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            // connect(2) is not retried after EINTR: the connection goes on asynchronously.
            if System_connect(socket.rawValue, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
                descriptor = socket
                return
            }
            lastError = SystemError("connect", errno: errno, path: host)
        }
        throw lastError
    }

    /// Sends all of `bytes`. The C function is `send`.
    package func sendAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            offset += try retryingInterrupts("send") {
                System_send(descriptor.rawValue, bytes.baseAddress! + offset, bytes.count - offset, sendFlags)
            }
        }
    }

    /// Receives what is there, at most `buffer.count` bytes; 0 when the peer closed.
    /// The C function is `recv`; a timeout is `EAGAIN`.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retryingInterrupts("recv") { recv(descriptor.rawValue, buffer.baseAddress, buffer.count, 0) }
    }

    /// Receives what arrives within `timeout`, at most `buffer.count` bytes; 0 when the peer
    /// closed. The C functions are `poll` and `recv`; nothing within `timeout` is `EAGAIN`, as
    /// the socket's own timeout is. (A caller with a deadline of its own waits in slices of it.)
    package func receive(into buffer: UnsafeMutableRawBufferPointer, waitingAtMost timeout: Duration)
        throws(SystemError) -> Int
    {
        let (seconds, attoseconds) = timeout.components
        // Rounded up: a wait of less than a millisecond left is not a poll that returns at once.
        let partial = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        let milliseconds = Int32(clamping: max(0, min(seconds, 1 << 30) * 1000 + partial))
        var entry = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        // An interrupted poll starts its wait again: a slice longer at most, never a lost byte.
        guard try retryingInterrupts("poll", { poll(&entry, 1, milliseconds) }) > 0 else {
            throw SystemError("poll", errno: EAGAIN)
        }
        return try receive(into: buffer)
    }
}

// The C functions, reached without the module name each C library gives them.
@inline(__always) private func System_socket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
    socket(domain, type, proto)
}
@inline(__always) private func System_connect(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t
) -> Int32 {
    connect(fd, address, length)
}
@inline(__always) private func System_send(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    send(fd, buffer, count, flags)
}
