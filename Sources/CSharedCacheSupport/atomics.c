// Sequentially consistent atomics on counters shared between processes through mmap(2).
// Lock-free 64-bit atomics on x86-64 and arm64 work across processes on the same memory.

#include "CSharedCacheSupport.h"

uint64_t scs_atomic_add_u64(uint64_t *counter, uint64_t value) {
    return __atomic_fetch_add(counter, value, __ATOMIC_SEQ_CST);
}

uint64_t scs_atomic_load_u64(const uint64_t *counter) {
    return __atomic_load_n(counter, __ATOMIC_SEQ_CST);
}

void scs_atomic_max_u64(uint64_t *counter, uint64_t value) {
    uint64_t current = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
    while (current < value &&
           !__atomic_compare_exchange_n(counter, &current, value, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
}
