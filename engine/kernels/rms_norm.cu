// RMSNorm over one vector with a stored weight, float32, one block (fixed-shape reduction).
#include <cstdint>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/kernel_common.cuh"

namespace wsb::dk {
namespace {

constexpr int kThreads = 256;

// x and out may alias: every read of x for the sum happens before the block_reduce barriers, and the final pass
// reads and writes the same index in the same thread.
template <class Codes>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* x, const uint8_t* __restrict__ w, int64_t n, float eps, float* out) {
  __shared__ float shared[33];
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) sum_sq += x[i] * x[i];
  const float total = detail::block_reduce(sum_sq, false, shared);
  // Same expression shape as the CPU rms_norm: 1 / sqrt(mean + eps) with IEEE division and square root.
  const float inv = 1.0f / sqrtf(total / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += kThreads) out[i] = Codes::at(w, i) * (x[i] * inv);
}

}  // namespace

void rms_norm(const float* x, const uint8_t* w, WeightType type, int64_t n, float eps, float* out,
              cudaStream_t stream) {
  detail::with_codes(type, [&](auto codes) {
    rms_norm_kernel<decltype(codes)><<<1, kThreads, 0, stream>>>(x, w, n, eps, out);
  });
  check_launch("rms_norm");
}

}  // namespace wsb::dk
