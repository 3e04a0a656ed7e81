// CRC32C with the CPU's CRC instruction where there is one.
//
// Buffers from 768 bytes run three independent instruction streams (the instruction has a
// latency of three cycles but a throughput of one) over chunks of three equal blocks, then fold
// each chunk's three together with a multiplication by x^(8 * block) modulo the polynomial.
// Blocks have one of two fixed sizes, so each multiplication is four lookups in a table built
// once (Mark Adler's crc32c.c does the same), not a computation per call.

#include "CSharedCacheSupport.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

// --- Arithmetic modulo the polynomial (reflected bit order: x^0 is the top bit) -------------

static uint32_t multiply_mod_poly(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return product;
}

/// x^(8 * bytes) mod P: what a raw CRC register is multiplied by when `bytes` zeros follow.
static uint32_t shift_for_bytes(size_t bytes) {
    uint32_t result = 1u << 31;  // x^0
    uint32_t power = 1u << 23;   // x^8
    while (bytes != 0) {
        if (bytes & 1) result = multiply_mod_poly(result, power);
        power = multiply_mod_poly(power, power);
        bytes >>= 1;
    }
    return result;
}

// --- Table fallback -------------------------------------------------------------------------

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[n] = c;
    }
}

static uint32_t raw_table(uint32_t crc, const uint8_t *p, size_t n) {
    pthread_once(&table_once, build_table);
    while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

// --- Hardware ------------------------------------------------------------------------------

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#define HW_TARGET __attribute__((target("sse4.2")))
#define HW_CRC_U64(c, v) ((uint32_t)_mm_crc32_u64((c), (v)))
#define HW_CRC_U8(c, v) _mm_crc32_u8((c), (v))
// CPUID itself, not __builtin_cpu_supports: that one needs the compiler runtime's
// __cpu_model, which Apple's does not provide, so an x86_64 Mac build would not link.
static int sse42;
static pthread_once_t sse42_once = PTHREAD_ONCE_INIT;
static void detect_sse42(void) {
    unsigned a, b, c, d;
    sse42 = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}
static int hardware_available(void) {
    pthread_once(&sse42_once, detect_sse42);
    return sse42;
}
#elif defined(__aarch64__)
#include <arm_acle.h>
#include "arm_features.h"
#define HW_TARGET __attribute__((target("+crc")))
#define HW_CRC_U64(c, v) __crc32cd((c), (v))
#define HW_CRC_U8(c, v) __crc32cb((c), (v))
static int hardware_available(void) { return scs_arm_has(SCS_ARM_CRC32); }
#endif

#ifdef HW_TARGET
// Always inlined, also in debug builds (-O0), where a call per eight bytes would halve the speed.
static inline __attribute__((always_inline)) uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);  // unaligned-safe; both targets are little-endian
    return v;
}

// The two block sizes: long blocks for the bulk of a large buffer, short ones for the rest
// and for buffers of a few kilobytes (a 1 KB body is one chunk of three short blocks and one
// short block on its own).
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

// Multiplication by x^(8 * block) as four tables, one per byte of the register.
typedef uint32_t shift_table[4][256];
static shift_table long_shift, short_shift;
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void build_shift_table(shift_table table, size_t block) {
    uint32_t shift = shift_for_bytes(block);
    for (int byte = 0; byte < 4; byte++) {
        for (uint32_t value = 0; value < 256; value++) {
            table[byte][value] = multiply_mod_poly(shift, value << (8 * byte));
        }
    }
}

static void build_shift_tables(void) {
    build_shift_table(long_shift, LONG_BLOCK);
    build_shift_table(short_shift, SHORT_BLOCK);
}

static inline uint32_t shifted(const shift_table table, uint32_t crc) {
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF]
        ^ table[3][crc >> 24];
}

// One chunk of three blocks of `block` bytes at `p`, folded into `crc`.
HW_TARGET static inline __attribute__((always_inline)) uint32_t chunk(
    uint32_t crc, const uint8_t *p, size_t block, const shift_table table) {
    uint32_t ca = crc, cb = 0, cc = 0;
    for (size_t i = 0; i < block; i += 8) {
        ca = HW_CRC_U64(ca, load64(p + i));
        cb = HW_CRC_U64(cb, load64(p + block + i));
        cc = HW_CRC_U64(cc, load64(p + 2 * block + i));
    }
    return shifted(table, shifted(table, ca) ^ cb) ^ cc;
}

HW_TARGET static uint32_t raw_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    if (n >= 3 * SHORT_BLOCK) {
        pthread_once(&shift_once, build_shift_tables);
        for (; n >= 3 * LONG_BLOCK; n -= 3 * LONG_BLOCK, p += 3 * LONG_BLOCK) {
            crc = chunk(crc, p, LONG_BLOCK, (const uint32_t(*)[256])long_shift);
        }
        for (; n >= 3 * SHORT_BLOCK; n -= 3 * SHORT_BLOCK, p += 3 * SHORT_BLOCK) {
            crc = chunk(crc, p, SHORT_BLOCK, (const uint32_t(*)[256])short_shift);
        }
    }
    for (; n >= 8; n -= 8, p += 8) crc = HW_CRC_U64(crc, load64(p));
    while (n--) crc = HW_CRC_U8(crc, *p++);
    return crc;
}
#endif

// --- Public --------------------------------------------------------------------------------

int scs_crc32c_is_hardware_accelerated(void) {
#ifdef HW_TARGET
    return hardware_available();
#else
    return 0;
#endif
}

uint32_t scs_crc32c_extend_zeros(uint32_t crc, uint64_t count) {
    // A zero byte multiplies the raw register by x^8, so `count` of them by x^(8 * count).
    return ~multiply_mod_poly(shift_for_bytes((size_t)count), ~crc);
}

uint32_t scs_crc32c_extend(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
#ifdef HW_TARGET
    if (hardware_available()) return ~raw_hardware(crc, p, length);
#endif
    return ~raw_table(crc, p, length);
}
