/*
 * floors: the bare system calls of a get and a put, timed one at a time, so sharedcache-bench
 * can set SharedCache next to the cost of the operation itself rather than of one design.
 *
 *   floors DIR SIZE
 *
 * Reads requests "OPERATION N" on standard input, one a line, does the operation on key N with
 * a value of SIZE bytes, and answers each with the nanoseconds it took, on a line of its own.
 * The time is taken here (CLOCK_MONOTONIC), so the round trip through the pipe is not counted;
 * the driver sends a turn's requests (one, or a batch) in one write, taking turns with
 * SharedCache and diskcache.
 *
 *   append N  one write(2) of the value to DIR/packed, opened once with O_APPEND
 *   pread N   pread(2) of key N's value from DIR/packed, opened once (O_NOATIME, as SharedCache
 *             opens its pack segments): the value at N * SIZE
 *             (the driver appends keys 0, 1, 2, ... in order, so that is where key N landed)
 *   create N  create DIR/tmp/N, write the value, close, rename to DIR/XX/<N in 64 hex digits>
 *             (XX = N mod 256), as a store of a file per key does; no fsync
 *   open N    open + pread of the value + close of the file `create N` made
 *   commit N  the system calls of SharedCache's put: pwrite of a record (the value and a
 *             184-byte header) at the end of DIR/segment, then, under a shared flock on
 *             DIR/journal, one write with O_APPEND of a 154-byte journal record and an lseek
 *             asking where it ended; so the benchmark can tell a put's system calls from the
 *             rest of its cost
 *
 * Files are left in DIR for the driver to remove. The end of standard input ends the program
 * (status 0); a failed call ends it with a message on standard error (status 1), and a bad
 * request or argument with status 64.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// Reads that do not update the file's access time, as SharedCache reads its pack segments: the
// cheapest read the machine offers (Linux O_NOATIME; the files are this process's own).
#ifdef O_NOATIME
#define NO_ACCESS_TIME O_NOATIME
#else
#define NO_ACCESS_TIME 0
#endif

_Noreturn static void fail(const char *what, const char *path)
{
    fprintf(stderr, "floors: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

// A read or write that moved fewer bytes than asked: for pread, the key is not in the file.
static void require(ssize_t done, size_t size, const char *what, const char *path)
{
    if (done < 0) fail(what, path);
    if ((size_t)done != size) {
        fprintf(stderr, "floors: %s %s: %zd of %zu bytes\n", what, path, done, size);
        exit(1);
    }
}

_Noreturn static void usage(const char *problem)
{
    fprintf(stderr, "floors: %s\nusage: floors DIR SIZE (then \"append|pread|create|open N\" lines)\n", problem);
    exit(64);
}

static uint64_t now(void)
{
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (uint64_t)time.tv_sec * 1000000000u + (uint64_t)time.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) usage("needs DIR and SIZE");
    const char *dir = argv[1];
    long parsed = strtol(argv[2], NULL, 10);
    if (parsed <= 0) usage("SIZE must be a positive number of bytes");
    size_t size = (size_t)parsed;

    char path[4096], temporary[4096];
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) fail("mkdir", dir);
    snprintf(path, sizeof path, "%s/tmp", dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST) fail("mkdir", path);
    for (unsigned folder = 0; folder < 256; folder++) {
        snprintf(path, sizeof path, "%s/%02x", dir, folder);
        if (mkdir(path, 0700) < 0 && errno != EEXIST) fail("mkdir", path);
    }

    // Two descriptors on one file: appends go to its end whatever else reads it, as a writer's
    // segment does, and reads never move an offset the appends depend on.
    char packed[4096];
    snprintf(packed, sizeof packed, "%s/packed", dir);
    int appender = open(packed, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (appender < 0) fail("open", packed);
    int reader = open(packed, O_RDONLY | O_CLOEXEC | NO_ACCESS_TIME);
    if (reader < 0) fail("open", packed);

    // The pack segment and journal of `commit`: the segment written at its end, as its one
    // writer does; the journal appended to, as every writer does.
    char segment_path[4096], journal_path[4096];
    snprintf(segment_path, sizeof segment_path, "%s/segment", dir);
    snprintf(journal_path, sizeof journal_path, "%s/journal", dir);
    int segment = open(segment_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (segment < 0) fail("open", segment_path);
    int journal = open(journal_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (journal < 0) fail("open", journal_path);
    off_t segment_end = 0;
    enum { record_header = 184, journal_record = 154 };

    // Bytes that are not all one value, so nothing below could store them specially; one buffer
    // for every read, so no read pays for an allocation: the floor is the system call.
    unsigned char *value = malloc(size), *buffer = malloc(size), *record = calloc(1, size + record_header);
    if (value == NULL || buffer == NULL || record == NULL) fail("malloc", "");
    for (size_t index = 0; index < size; index++) value[index] = (unsigned char)(index * 131 + 7);
    memcpy(record + record_header, value, size);
    unsigned char entry[journal_record] = {0};

    char line[128], operation[16];
    long key;
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (sscanf(line, "%15s %ld", operation, &key) != 2 || key < 0) usage("bad request");
        // Names are made before the clock starts: the floor is the system calls, not snprintf.
        snprintf(temporary, sizeof temporary, "%s/tmp/%ld", dir, key);
        snprintf(path, sizeof path, "%s/%02lx/%064lx", dir, (unsigned long)key % 256, (unsigned long)key);
        uint64_t before = now();
        if (strcmp(operation, "append") == 0) {
            require(write(appender, value, size), size, "write", packed);
        } else if (strcmp(operation, "pread") == 0) {
            require(pread(reader, buffer, size, (off_t)key * (off_t)size), size, "pread", packed);
        } else if (strcmp(operation, "create") == 0) {
            int file = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (file < 0) fail("open", temporary);
            require(write(file, value, size), size, "write", temporary);
            close(file);
            if (rename(temporary, path) < 0) fail("rename", temporary);
        } else if (strcmp(operation, "open") == 0) {
            int file = open(path, O_RDONLY | O_CLOEXEC);
            if (file < 0) fail("open", path);
            require(pread(file, buffer, size, 0), size, "pread", path);
            close(file);
        } else if (strcmp(operation, "commit") == 0) {
            require(pwrite(segment, record, size + record_header, segment_end), size + record_header, "pwrite",
                segment_path);
            segment_end += (off_t)(size + record_header);
            if (flock(journal, LOCK_SH) < 0) fail("flock", journal_path);
            require(write(journal, entry, sizeof entry), sizeof entry, "write", journal_path);
            if (lseek(journal, 0, SEEK_CUR) < 0) fail("lseek", journal_path);
            if (flock(journal, LOCK_UN) < 0) fail("flock", journal_path);
        } else {
            usage("unknown operation");
        }
        uint64_t elapsed = now() - before;
        printf("%llu\n", (unsigned long long)elapsed);
        fflush(stdout);
    }
    return 0;
}
