#pragma once
// The per-word terms of digest64 (core/digest64.hpp), shared by host code and CUDA kernels (C++17, no
// standard headers beyond <cstdint>, usable under nvcc).
#include <cstdint>

#if defined(__CUDACC__)
#define WSBENCH_HOST_DEVICE __host__ __device__
#else
#define WSBENCH_HOST_DEVICE
#endif

namespace wsb {

/// splitmix64 finalizer (Steele, Lea, Flood 2014; the constants of Vigna's splitmix64.c).
WSBENCH_HOST_DEVICE inline uint64_t digest64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Term of word `index` in the sum.
WSBENCH_HOST_DEVICE inline uint64_t digest64_term(uint64_t word, uint64_t index) {
  return digest64_finalize(word ^ ((index + 1) * 0x9E3779B97F4A7C15ull));
}

/// Digest from the term sum and the byte length.
WSBENCH_HOST_DEVICE inline uint64_t digest64_close(uint64_t sum, uint64_t bytes) { return digest64_finalize(sum ^ bytes); }

}  // namespace wsb
