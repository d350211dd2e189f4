#pragma once
// Shared helpers of the GPU suites (tests/engine/cuda, tests/engine/quant): skipping without a device, and
// deterministic byte patterns that are never all zero (a zero-filled arena must not pass a round trip).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cuda/cuda_ops.hpp"

namespace wsb::test {

/// True when this binary was built with CUDA and a device is visible.
inline bool have_gpu() { return cuda_ops::built() && cuda_ops::visible_devices() > 0; }

/// Skips the current test (GTEST_SKIP) when there is no CUDA device, so CI without a GPU passes.
#define WSBENCH_REQUIRE_GPU()                                                                     \
  do {                                                                                        \
    if (!::wsb::test::have_gpu()) {                                                           \
      GTEST_SKIP() << (::wsb::cuda_ops::built() ? "no CUDA device" : "built without CUDA");   \
    }                                                                                         \
  } while (0)

/// `n` bytes from a seeded generator; every byte value occurs, zero included, but the run is never all zeros.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  if (n > 0 && v[0] == 0) v[0] = 0xA5;
  return v;
}

/// FNV-1a 64 of `bytes` (exact-value checks that print one number instead of a buffer).
inline uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
inline uint64_t fnv1a(const std::vector<uint8_t>& v) { return fnv1a(v.data(), v.size()); }

/// The bit pattern of `f` (bitwise comparisons of float results, NaN included).
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace wsb::test
