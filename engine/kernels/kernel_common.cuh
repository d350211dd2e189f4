#pragma once
// Device-side helpers shared by the kernel files (C++17, CUDA only): exact widening of stored weight codes, the
// launch shape of the element-wise kernels and fixed-shape reductions. Every reduction here combines values in an
// order fixed by the block shape alone.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/device_kernels.hpp"

namespace wsb::dk::detail {

/// BF16 codes: float = code << 16 (BF16 is the upper half of binary32; safetensors spec "BF16").
struct Bf16 {
  static constexpr int kSize = 2;
  static constexpr int kPerVec = 8;  ///< elements per 16-byte load
  __device__ static float at(const uint8_t* p, int64_t i) {
    const uint16_t code = reinterpret_cast<const uint16_t*>(p)[i];
    return __uint_as_float(static_cast<uint32_t>(code) << 16);
  }
  /// Little-endian: the low half of each 32-bit word is the lower-index element.
  __device__ static void unpack(const uint4& v, float* out) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};

/// F16 (IEEE binary16) codes: __half2float is exact.
struct F16 {
  static constexpr int kSize = 2;
  static constexpr int kPerVec = 8;
  __device__ static float at(const uint8_t* p, int64_t i) {
    return __half2float(__ushort_as_half(reinterpret_cast<const uint16_t*>(p)[i]));
  }
  __device__ static void unpack(const uint4& v, float* out) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
      out[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
    }
  }
};

struct F32 {
  static constexpr int kSize = 4;
  static constexpr int kPerVec = 4;
  __device__ static float at(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
  __device__ static void unpack(const uint4& v, float* out) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
};

/// Threads per block of the element-wise kernels (grid-stride loops over their elements).
constexpr int kPointwiseThreads = 256;

/// Blocks for n elements at kPointwiseThreads each: at least 1, at most 65535 (grid-stride loops cover the rest).
inline unsigned pointwise_blocks(int64_t n) {
  const int64_t b = (n + kPointwiseThreads - 1) / kPointwiseThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

/// Calls fn(Codes{}) with the codes struct of `type` (host side, to pick a kernel instantiation).
template <class Fn>
void with_codes(WeightType type, Fn&& fn) {
  switch (type) {
    case WeightType::BF16:
      fn(Bf16{});
      break;
    case WeightType::F16:
      fn(F16{});
      break;
    case WeightType::F32:
      fn(F32{});
      break;
  }
}

/// Sum over the 32 lanes of a warp by a __shfl_down_sync tree; the result is valid in lane 0 only (other lanes
/// hold partial sums in a different order and must not be used).
__device__ inline float warp_sum_lane0(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

/// Block-wide sum (is_max false) or max (true) of one value per thread, returned to every thread. Lanes combine
/// through warp_sum_lane0's tree shape, then thread 0 folds the warp results in warp order. `shared` holds 33
/// floats; the call contains __syncthreads (all threads of the block must call it) and leaves `shared` reusable.
__device__ inline float block_reduce(float v, bool is_max, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = shared[0];
    for (int w = 1; w < warps; ++w) total = is_max ? fmaxf(total, shared[w]) : total + shared[w];
    shared[32] = total;
  }
  __syncthreads();
  const float result = shared[32];
  __syncthreads();
  return result;
}

}  // namespace wsb::dk::detail
