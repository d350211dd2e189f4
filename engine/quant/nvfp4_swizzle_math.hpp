#pragma once
// Inverse of the NVFP4 128x4 tile swizzle (models/transform/nvfp4.hpp), compiled for device and host: the device
// kernel gives each output byte one thread, which finds the gathered byte it holds (or none: padding). The tests run
// it on the host against nvfp4_scale_offset and the host transform. C++17, no CUDA headers.
#include <cstdint>

#include "engine/quant/matvec_math.hpp"  // WSBENCH_HD

namespace wsb::quant {

/// For byte `o` of a swizzled runtime tensor [E, Mp, Kp] (Mp % 128 == 0, Kp % 4 == 0) whose gathered source is
/// [E, m_count, k_count] row-major: the index of the gathered byte stored there, or -1 for padding. Inverts
///   o = e*Mp*Kp + mt*128*Kp + kt*512 + r32*16 + r4*4 + k4,  m = 128*mt + 32*r4 + r32,  k = 4*kt + k4.
WSBENCH_HD int64_t nvfp4_swizzle_source(int64_t mp, int64_t kp, int64_t m_count, int64_t k_count, int64_t o) {
  const int64_t per_expert = mp * kp, tile = 128 * kp;
  const int64_t e = o / per_expert, w = o % per_expert;
  const int64_t mt = w / tile, in_tile = w % tile;
  const int64_t kt = in_tile / 512, in_block = in_tile % 512;
  const int64_t r32 = in_block / 16, r4 = (in_block % 16) / 4, k4 = in_block % 4;
  const int64_t m = 128 * mt + 32 * r4 + r32, k = 4 * kt + k4;
  if (m >= m_count || k >= k_count) return -1;
  return (e * m_count + m) * k_count + k;
}

}  // namespace wsb::quant
