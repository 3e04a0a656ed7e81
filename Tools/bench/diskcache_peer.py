"""The peer side of sharedcache-bench: python-diskcache running the same workloads.

    python diskcache_peer.py mixed DIR KEYS OPERATIONS SEED START_AT_NS OUT
        waits until START_AT_NS (CLOCK_MONOTONIC), then OPERATIONS operations over KEYS keys,
        90 % get / 10 % put of 1 KB; writes every latency in nanoseconds to OUT, one per line,
        after a first line "START END" of the run's monotonic times.
    python diskcache_peer.py serve DIR SIZE
        reads "put N" or "get N" lines; does each operation on key N and answers with the
        nanoseconds it took, measured here; so the driver can have diskcache's operations take
        turns with SharedCache's and the floor's (one, or a batch, at a time), on the same
        moment of a noisy machine.
    python diskcache_peer.py fill DIR KEYS SIZE
        stores KEYS keys of SIZE bytes (the mixed run's starting state).

Keys are the same URLs SharedCache's workloads use; values are incompressible bytes. diskcache
runs with its defaults (SQLite in WAL mode, synchronous=NORMAL; values of 32 KiB or more in
their own files), as a user would get it.
"""

import os
import random
import sys
import time

import diskcache


def key(index):
    return f"https://example.com/assets/{index}/image.png"


def serve(directory, size):
    cache = diskcache.Cache(directory)
    value = os.urandom(size)
    clock = time.perf_counter_ns
    for line in sys.stdin:
        command, number = line.split()
        name = key(int(number))
        if command == "put":
            before = clock()
            cache.set(name, value)
            elapsed = clock() - before
        else:
            before = clock()
            found = cache.get(name)
            elapsed = clock() - before
            if found is None:
                raise SystemExit(f"diskcache lost {name}")
        sys.stdout.write(f"{elapsed}\n")
        sys.stdout.flush()
    cache.close()


def fill(directory, keys, size):
    cache = diskcache.Cache(directory)
    value = os.urandom(size)
    for index in range(keys):
        cache.set(key(index), value)
    cache.close()


def mixed(directory, keys, operations, seed, start_at, out):
    cache = diskcache.Cache(directory)
    generator = random.Random(seed)
    value = os.urandom(1024)
    clock = time.monotonic_ns
    while clock() < start_at:
        time.sleep(0.0005)
    samples = []
    start = clock()
    for _ in range(operations):
        name = key(generator.randrange(keys))
        before = clock()
        if generator.randrange(10) == 0:
            cache.set(name, value)
        else:
            cache.get(name)
        samples.append(clock() - before)
    end = clock()
    cache.close()
    with open(out, "w") as file:
        file.write(f"{start} {end}\n")
        file.write("\n".join(str(sample) for sample in samples))
        file.write("\n")


def main(arguments):
    command = arguments[0]
    if command == "serve":
        serve(arguments[1], int(arguments[2]))
    elif command == "fill":
        fill(arguments[1], int(arguments[2]), int(arguments[3]))
    elif command == "mixed":
        mixed(arguments[1], int(arguments[2]), int(arguments[3]), int(arguments[4]), int(arguments[5]), arguments[6])
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
