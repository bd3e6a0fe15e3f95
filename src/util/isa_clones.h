// INGOT_ISA_CLONES: compile a loop-heavy function for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2 + FMA) and the baseline, one picked at load time by the CPU's
// features (an ifunc resolver). Both vector levels have FMA, so std::fma in
// such a function is one vector instruction there. ThreadSanitizer instruments
// the resolver, which the loader runs before the sanitizer is set up (a crash at
// start-up), so that build keeps the baseline version only.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define INGOT_NO_IFUNC 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define INGOT_NO_IFUNC 1
#endif
#ifdef INGOT_NO_IFUNC
#define INGOT_ISA_CLONES
#else
#define INGOT_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
