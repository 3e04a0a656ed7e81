// SHA-256 as specified in FIPS 180-4. Every cache call hashes its key, so where the CPU has
// SHA-256 instructions (x86-64 SHA-NI; the ARMv8 SHA-2 extension, which every Apple arm64 CPU
// has) a block takes a few dozen instructions instead of thousands; elsewhere the portable
// compression function below runs.

#include "CSharedCacheSupport.h"

#include <pthread.h>
#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
// Σ0 and Σ1 with each rotation applied to the previous result (the same three rotations,
// factored), which saves the copies a rotation of the original value needs.
#define BIG_SIGMA0(x) ROTR((x) ^ ROTR((x) ^ ROTR(x, 9), 11), 2)
#define BIG_SIGMA1(x) ROTR((x) ^ ROTR((x) ^ ROTR(x, 14), 5), 6)
#define SMALL_SIGMA0(x) (ROTR(x, 7) ^ ROTR(x, 18) ^ ((x) >> 3))
#define SMALL_SIGMA1(x) (ROTR(x, 17) ^ ROTR(x, 19) ^ ((x) >> 10))
#define CHOOSE(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MAJORITY(x, y, z) (((x) & (y)) | ((z) & ((x) | (y))))

// One round, with the eight working variables named in their rotated order, so that no
// round moves them between registers; `w` is the round's message word.
#define ROUND(a, b, c, d, e, f, g, h, k, w)                                      \
    do {                                                                         \
        uint32_t t1 = (h) + BIG_SIGMA1(e) + CHOOSE(e, f, g) + (k) + (w);          \
        (d) += t1;                                                               \
        (h) = t1 + BIG_SIGMA0(a) + MAJORITY(a, b, c);                            \
    } while (0)

// Eight rounds from round `i`: the variables' roles rotate once per round and are back in
// place after eight.
#define EIGHT_ROUNDS(i, w)                                                       \
    do {                                                                         \
        ROUND(a, b, c, d, e, f, g, h, K[(i) + 0], w[(i) + 0]);                   \
        ROUND(h, a, b, c, d, e, f, g, K[(i) + 1], w[(i) + 1]);                   \
        ROUND(g, h, a, b, c, d, e, f, K[(i) + 2], w[(i) + 2]);                   \
        ROUND(f, g, h, a, b, c, d, e, K[(i) + 3], w[(i) + 3]);                   \
        ROUND(e, f, g, h, a, b, c, d, K[(i) + 4], w[(i) + 4]);                   \
        ROUND(d, e, f, g, h, a, b, c, K[(i) + 5], w[(i) + 5]);                   \
        ROUND(c, d, e, f, g, h, a, b, K[(i) + 6], w[(i) + 6]);                   \
        ROUND(b, c, d, e, f, g, h, a, K[(i) + 7], w[(i) + 7]);                   \
    } while (0)

// The rounds are written out eight at a time (the compiler keeps the state in registers
// instead of shifting it down each round): a quarter fewer instructions than a plain loop
// (3,265 a block, callgrind), where there are no SHA instructions. Natively the time hardly
// changes, as each round waits for the one before.
static void compress_portable(uint32_t state[8], const uint8_t block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) w[i] = w[i - 16] + SMALL_SIGMA0(w[i - 15]) + w[i - 7] + SMALL_SIGMA1(w[i - 2]);
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i += 8) EIGHT_ROUNDS(i, w);
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

// --- SHA-NI -------------------------------------------------------------------------------

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#define HAVE_SHA_NI 1
#define SHA_NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

static int sha_ni;
static pthread_once_t sha_ni_once = PTHREAD_ONCE_INIT;

static void detect_sha_ni(void) {
    unsigned a, b, c, d;
    int ssse3_sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1);
    sha_ni = ssse3_sse41 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

static int sha_ni_available(void) {
    pthread_once(&sha_ni_once, detect_sha_ni);
    return sha_ni;
}

// The state lives in two registers as ABEF and CDGH, the order sha256rnds2 works in. Each
// group of four rounds adds four words of K to four message words; the schedule for later
// groups is built with sha256msg1/msg2 four groups ahead.
SHA_NI_TARGET static void compress_sha_ni(uint32_t state[8], const uint8_t block[64]) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    const __m128i abef_start = abef, cdgh_start = cdgh;

    __m128i w[4];
    for (int group = 0; group < 16; group++) {
        int now = group % 4, next = (group + 1) % 4, previous = (group + 3) % 4;
        if (group < 4) w[now] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * group)), byte_swap);
        __m128i message = _mm_add_epi32(w[now], _mm_loadu_si128((const __m128i *)&K[4 * group]));
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
        if (group >= 3 && group <= 14) {
            w[next] = _mm_add_epi32(w[next], _mm_alignr_epi8(w[now], w[previous], 4));
            w[next] = _mm_sha256msg2_epu32(w[next], w[now]);
        }
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
        if (group >= 1 && group <= 12) w[previous] = _mm_sha256msg1_epu32(w[previous], w[now]);
    }
    abef = _mm_add_epi32(abef, abef_start);
    cdgh = _mm_add_epi32(cdgh, cdgh_start);

    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

// --- ARMv8 SHA-2 ---------------------------------------------------------------------------

#if defined(__aarch64__)
#include <arm_neon.h>
#include "arm_features.h"

#define HAVE_ARM_SHA2 1

// The state lives in two registers, ABCD and EFGH, as sha256h/sha256h2 take it. Each group of
// four rounds adds four words of K to four message words; the words for the group four later
// are built in the same register with sha256su0/su1.
__attribute__((target("+crypto"))) static void compress_arm_sha2(uint32_t state[8], const uint8_t block[64]) {
    uint32x4_t abcd = vld1q_u32(&state[0]);
    uint32x4_t efgh = vld1q_u32(&state[4]);
    const uint32x4_t abcd_start = abcd, efgh_start = efgh;
    uint32x4_t w[4];
    for (int i = 0; i < 4; i++) w[i] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(block + 16 * i)));
    for (int group = 0; group < 16; group++) {
        int now = group % 4;
        uint32x4_t message = vaddq_u32(w[now], vld1q_u32(&K[4 * group]));
        if (group < 12) {
            w[now] = vsha256su1q_u32(vsha256su0q_u32(w[now], w[(now + 1) % 4]), w[(now + 2) % 4], w[(now + 3) % 4]);
        }
        uint32x4_t abcd_before = abcd;
        abcd = vsha256hq_u32(abcd, efgh, message);
        efgh = vsha256h2q_u32(efgh, abcd_before, message);
    }
    vst1q_u32(&state[0], vaddq_u32(abcd, abcd_start));
    vst1q_u32(&state[4], vaddq_u32(efgh, efgh_start));
}
#endif

// --- Public --------------------------------------------------------------------------------

static void sha256(const void *data, size_t length, uint8_t digest[32],
                   void (*compress)(uint32_t[8], const uint8_t[64])) {
    uint32_t state[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    const uint8_t *p = (const uint8_t *)data;
    size_t remaining = length;
    for (; remaining >= 64; remaining -= 64, p += 64) compress(state, p);

    // Padding: 0x80, zeros, then the message length in bits as a big-endian 64-bit number.
    uint8_t tail[128] = {0};
    if (remaining > 0) memcpy(tail, p, remaining);
    tail[remaining] = 0x80;
    size_t tail_length = remaining + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; i++) tail[tail_length - 1 - i] = (uint8_t)(bits >> (8 * i));
    compress(state, tail);
    if (tail_length == 128) compress(state, tail + 64);

    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)state[i];
    }
}

void scs_sha256(const void *data, size_t length, uint8_t digest[32]) {
#if defined(HAVE_SHA_NI)
    if (sha_ni_available()) {
        sha256(data, length, digest, compress_sha_ni);
        return;
    }
#elif defined(HAVE_ARM_SHA2)
    if (scs_arm_has(SCS_ARM_SHA2)) {
        sha256(data, length, digest, compress_arm_sha2);
        return;
    }
#endif
    sha256(data, length, digest, compress_portable);
}

void scs_sha256_portable(const void *data, size_t length, uint8_t digest[32]) {
    sha256(data, length, digest, compress_portable);
}

int scs_sha256_is_hardware_accelerated(void) {
#if defined(HAVE_SHA_NI)
    return sha_ni_available();
#elif defined(HAVE_ARM_SHA2)
    return scs_arm_has(SCS_ARM_SHA2);
#else
    return 0;
#endif
}
