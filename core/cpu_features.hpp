#pragma once
// Which optional x86-64 instruction sets this CPU has, for the loops that pick a faster form at run time (host code
// is built for baseline x86-64). Every such form gives exactly the portable form's result.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// Defined where AVX-512 forms can be compiled (GCC or Clang on x86-64, `__attribute__((target(...)))`).
#define WSBENCH_AVX512_DISPATCH 1
#endif

namespace wsb {

/// True when the CPU has AVX-512F and AVX-512DQ (every AVX-512 form in wsbench needs at most these two) and
/// set_avx512_allowed has not turned them off; false where WSBENCH_AVX512_DISPATCH is not defined. The CPU is read
/// once, then cached.
bool cpu_has_avx512();

/// For tests: `false` makes cpu_has_avx512() answer false, so the portable form of every loop runs on a CPU that has
/// AVX-512 too; `true` restores the CPU's answer. Call it while no dispatched loop runs (an Xxh3Hasher keeps the
/// form it was constructed with).
void set_avx512_allowed(bool allowed);

}  // namespace wsb
