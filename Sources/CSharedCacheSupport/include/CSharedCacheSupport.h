#ifndef C_SHARED_CACHE_SUPPORT_H
#define C_SHARED_CACHE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// Extends a CRC32C (Castagnoli, reflected polynomial 0x82F63B78) over `length` bytes.
///
/// Start with `crc == 0`; the pre- and post-inversion are applied inside, so
/// `crc32c_extend(crc32c_extend(0, a), b) == crc32c_extend(0, a ++ b)`.
/// Uses the SSE4.2 or ARMv8 CRC instruction when the CPU has it, a table otherwise.
uint32_t scs_crc32c_extend(uint32_t crc, const void *data, size_t length);

/// `scs_crc32c_extend` over `count` zero bytes, in O(log count) without reading them: what a
/// hole in a sparse file contributes.
uint32_t scs_crc32c_extend_zeros(uint32_t crc, uint64_t count);

/// 1 when `scs_crc32c_extend` runs on a CPU instruction, 0 when it falls back to a table.
int scs_crc32c_is_hardware_accelerated(void);

/// SHA-256 (FIPS 180-4) of `length` bytes into `digest`.
void scs_sha256(const void *data, size_t length, uint8_t digest[32]);

/// The same digest from the portable code, whatever the CPU has (tests compare the two).
void scs_sha256_portable(const void *data, size_t length, uint8_t digest[32]);

/// 1 when `scs_sha256` runs on the CPU's SHA instructions, 0 when on portable code.
int scs_sha256_is_hardware_accelerated(void);

/// Linux `renameat2(..., RENAME_NOREPLACE)`: fails with EEXIST instead of replacing `to`.
/// Returns 0, or -1 with errno set (EINVAL or ENOSYS where the filesystem or kernel lacks it).
/// On other systems it always fails with ENOSYS; Darwin callers use `renameatx_np` instead.
int scs_rename_noreplace(int from_dir, const char *from, int to_dir, const char *to);

/// Linux `pipe2(ends, O_CLOEXEC | O_NONBLOCK)`: a pipe whose ends close on exec, made in one
/// step. Returns 0, or -1 with errno set. On other systems it always fails with ENOSYS.
int scs_pipe_cloexec(int ends[2]);

/// Starts `path` with `arguments` and `environment` (both NULL-terminated) as posix_spawn(3)
/// does, with no signal blocked. The child's standard input, output and error become `input`,
/// `output` and `error_output` (each -1: this process's own; `error_output` may be 1, the child's
/// standard output), and it inherits no other descriptor, whatever their close-on-exec flags:
/// a descriptor another thread opened meanwhile must not keep a pipe or a lock open in the
/// child. Returns 0 and sets `pid`, or an errno value (ENOENT, EACCES: the executable; ENOSYS
/// on iOS, tvOS and watchOS, where processes cannot be started).
int scs_spawn(int *pid, const char *path, char *const arguments[], char *const environment[],
              int input, int output, int error_output);

/// Linux `O_NOATIME` (reads of the file do not update its access time; allowed only on files the
/// caller owns, else EPERM), which Swift's Glibc module does not export; 0 on other systems.
int scs_no_access_time_flag(void);

/// Linux `fstatfs(fd).f_type`: the filesystem's magic number (as in linux/magic.h), or -1 with
/// errno set. On other systems it always fails with ENOSYS; Darwin callers read `f_fstypename`.
int64_t scs_filesystem_magic(int fd);

/// The size and link count of the open file `fd`, without asking for its times: Linux `statx`
/// for those two alone (a file whose times were read costs more at its next write), `fstat`
/// elsewhere and where `statx` is refused. Returns 0, or -1 with errno set.
int scs_size_and_links(int fd, int64_t *size, uint64_t *links);

/// Atomically adds `value` to the 64-bit counter at `counter` (which must be 8-byte aligned, and
/// may live in memory shared between processes by mmap(2)). Returns the previous value.
uint64_t scs_atomic_add_u64(uint64_t *counter, uint64_t value);

/// Atomically reads the 64-bit counter at `counter`.
uint64_t scs_atomic_load_u64(const uint64_t *counter);

/// Atomically raises the 64-bit value at `counter` to at least `value`.
void scs_atomic_max_u64(uint64_t *counter, uint64_t value);

/// Asks the CPU to start loading the cache line at `address` for a write soon, and returns at
/// once: a hint, never a fault, whatever `address` is.
static inline void scs_prefetch_for_writing(const void *address) { __builtin_prefetch(address, 1, 3); }

/// Whether `scs_guarded_copy` copies (installing its SIGBUS handler the first time it is asked):
/// 1 on Linux while that handler is in place, 0 once another was put in its place, and on
/// other systems.
int scs_guarded_copy_is_available(void);

/// Copies `first_count` bytes from `source`, a mapping of a file, to `first`, and the
/// `second_count` bytes after them to `second` (a record's header to one place, its body to
/// another), surviving the file having been cut short under the mapping, or failing to read:
/// returns 0 when copied, 1 when touching `source` raised SIGBUS (the destinations then hold
/// part of the bytes), -1 when the copy is not guarded and was not made (other systems; this
/// thread blocks SIGBUS, which is asked until a copy finds it unblocked, and never after; the
/// handler was reset). Any other SIGBUS goes to the disposition in
/// place before, under its own mask and flags.
int scs_guarded_copy(const void *source, void *first, size_t first_count, void *second, size_t second_count);

/// Guards the shared mapping of `size` bytes at `start` (page-aligned, mapped from a small file
/// every process writes in place) for as long as it stays mapped: a fault in it (the file cut
/// short under it) replaces it with private zeros, which the faulting instruction then reads,
/// and marks it lost. Returns the guard's slot, or -1 when it cannot be guarded (as for
/// `scs_guarded_copy_is_available`, or 256 guarded already). Unguard it before unmapping it.
int scs_guard_losable_mapping(void *start, size_t size);

/// Whether the mapping guarded in `slot` was lost (and now holds this process's zeros).
int scs_losable_mapping_was_lost(int slot);

/// Stops guarding the mapping in `slot` (-1: none).
void scs_unguard_losable_mapping(int slot);

#endif
