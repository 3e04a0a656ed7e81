// Built for aarch64 by ChecksumsOnArm64Tests and run under qemu-user: the ARMv8 CRC32 and
// SHA-2 paths of CSharedCacheSupport against published vectors, a bitwise CRC32C and the
// portable SHA-256. Prints each failure; exits 0 when all pass.
//
// Usage: check ACCELERATED   (1: both must run on the CPU's instructions; 0: neither may)

#include "CSharedCacheSupport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void fail(const char *what, size_t length) {
    printf("FAIL %s at length %zu\n", what, length);
    failures++;
}

static uint32_t bitwise_crc32c(const uint8_t *p, size_t n) {
    uint32_t crc = ~0u;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static int hex_equals(const uint8_t digest[32], const char *hex) {
    char text[65];
    for (int i = 0; i < 32; i++) snprintf(text + 2 * i, 3, "%02x", digest[i]);
    return strcmp(text, hex) == 0;
}

int main(int argc, char **argv) {
    int accelerated = argc > 1 && atoi(argv[1]);
    if (scs_crc32c_is_hardware_accelerated() != accelerated) fail("CRC32C acceleration", 0);
    if (scs_sha256_is_hardware_accelerated() != accelerated) fail("SHA-256 acceleration", 0);

    // FIPS 180-4 examples and the CRC32C check value.
    const char *messages[][2] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof messages / sizeof *messages; i++) {
        uint8_t digest[32];
        scs_sha256(messages[i][0], strlen(messages[i][0]), digest);
        if (!hex_equals(digest, messages[i][1])) fail("SHA-256 vector", strlen(messages[i][0]));
    }
    if (scs_crc32c_extend(0, "123456789", 9) != 0xE3069283u) fail("CRC32C check value", 9);

    static uint8_t bytes[70010];
    srand(20261127);
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)rand();
    for (size_t length = 0; length <= 320; length++) {
        uint8_t fast[32], portable[32];
        scs_sha256(bytes, length, fast);
        scs_sha256_portable(bytes, length, portable);
        if (memcmp(fast, portable, 32) != 0) fail("SHA-256 against the portable code", length);
    }
    // Both sides of where the three-stream paths start (3 × 256 and 3 × 8 KiB), at an odd offset.
    const size_t lengths[] = {0, 1, 7, 8, 9, 255, 767, 768, 769, 1024, 1537, 24575, 24576, 24577, 70000};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        if (scs_crc32c_extend(0, bytes + 3, lengths[i]) != bitwise_crc32c(bytes + 3, lengths[i])) {
            fail("CRC32C against the bitwise reference", lengths[i]);
        }
    }
    printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
