// Dense matvec over stored BF16/F16/F32 weights: one warp per output row, float32 accumulation, fixed order.
#include <cstdint>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/kernel_common.cuh"

namespace wsb::dk {
namespace {

constexpr int kWarpsPerBlock = 8;

/// Lane l sums, in index order, the 16-byte chunks l, l + 32, l + 64, ... of its row (each chunk's elements in
/// order) when `vec`, else the elements l, l + 32, ...; then the warp tree. The order depends only on cols and on
/// `vec`, which the launcher derives from the shapes and addresses (fixed for a storage).
template <class Codes>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matvec_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, const float* __restrict__ x,
                  float* __restrict__ y, bool vec) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps leave together, so the shuffles below see full warps
  const uint8_t* wr = w + row * cols * Codes::kSize;
  float acc = 0.0f;
  if (vec) {
    const uint4* wv = reinterpret_cast<const uint4*>(wr);
    const int64_t chunks = cols / Codes::kPerVec;
#pragma unroll 4
    for (int64_t c = lane; c < chunks; c += 32) {
      const uint4 q = __ldg(wv + c);
      float f[Codes::kPerVec];
      Codes::unpack(q, f);
      const float4* xv = reinterpret_cast<const float4*>(x + c * Codes::kPerVec);
#pragma unroll
      for (int j = 0; j < Codes::kPerVec / 4; ++j) {
        const float4 xx = __ldg(xv + j);
        acc += f[4 * j] * xx.x;
        acc += f[4 * j + 1] * xx.y;
        acc += f[4 * j + 2] * xx.z;
        acc += f[4 * j + 3] * xx.w;
      }
    }
  } else {
    for (int64_t c = lane; c < cols; c += 32) acc += Codes::at(wr, c) * x[c];
  }
  acc = detail::warp_sum_lane0(acc);
  if (lane == 0) y[row] = acc;
}

}  // namespace

void matvec(const uint8_t* w, WeightType type, int64_t rows, int64_t cols, const float* x, float* y,
            cudaStream_t stream) {
  if (rows <= 0) return;
  const int64_t row_bytes = cols * weight_type_size(type);
  const bool vec = reinterpret_cast<uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  detail::with_codes(type, [&](auto codes) {
    matvec_kernel<decltype(codes)><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(w, rows, cols, x, y, vec);
  });
  check_launch("matvec");
}

}  // namespace wsb::dk
