/// A failed system call: which call, on what path, and the `errno` it returned.
///
/// The platform layer throws only this; the layers above translate it into a
/// ``SharedCacheError`` that says what to do about it.
struct SystemError: Error, Sendable, Equatable {
    /// The C function that failed, such as `"openat"`.
    var call: String
    /// The `errno` value the call left.
    var errno: Int32
    /// The path the call was about, relative to the cache directory where there is one.
    var path: String?

    init(_ call: String, errno: Int32, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }
}
