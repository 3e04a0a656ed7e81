// Which optional ARMv8 instructions this CPU has, asked once at run time, for code compiled
// for them with a target attribute where the compiler's default CPU lacks them (generic
// aarch64 Linux builds; Apple's arm64 iOS builds target the A7, which has the SHA-2
// instructions but not CRC32, which every device iOS 16 runs on has).

#ifndef SCS_ARM_FEATURES_H
#define SCS_ARM_FEATURES_H

#if defined(__aarch64__)
#if defined(__APPLE__)
#include <sys/sysctl.h>
#elif defined(__linux__)
#include <sys/auxv.h>
#endif

enum scs_arm_feature { SCS_ARM_CRC32, SCS_ARM_SHA2 };

static inline int scs_arm_ask(enum scs_arm_feature feature) {
#if defined(__APPLE__)
    const char *name = feature == SCS_ARM_CRC32 ? "hw.optional.armv8_crc32" : "hw.optional.arm.FEAT_SHA256";
    int value = 0;
    size_t size = sizeof(value);
    if (sysctlbyname(name, &value, &size, NULL, 0) != 0) return 0;
    return value != 0;
#elif defined(__linux__)
    // HWCAP_CRC32 and HWCAP_SHA2 of the kernel's <asm/hwcap.h> for arm64.
    unsigned long bit = feature == SCS_ARM_CRC32 ? 1ul << 7 : 1ul << 6;
    return (getauxval(AT_HWCAP) & bit) != 0;
#else
    (void)feature;
    return 0;
#endif
}

// Whether the CPU has `feature`: known at compile time where the compiler targets it, else
// asked once (a system call on Apple) and remembered. Threads asking at once get one answer.
static inline int scs_arm_has(enum scs_arm_feature feature) {
#if defined(__ARM_FEATURE_CRC32)
    if (feature == SCS_ARM_CRC32) return 1;
#endif
#if defined(__ARM_FEATURE_SHA2)
    if (feature == SCS_ARM_SHA2) return 1;
#endif
    static int known[2] = {-1, -1};  // -1: not asked yet
    int value = __atomic_load_n(&known[feature], __ATOMIC_RELAXED);
    if (value < 0) {
        value = scs_arm_ask(feature);
        __atomic_store_n(&known[feature], value, __ATOMIC_RELAXED);
    }
    return value;
}
#endif

#endif
