// Element-wise kernels of the MoE device forwards (moe_kernels.hpp): biases, the SwiGLU variants over expert slots,
// the weighted expert sums and a device copy. Every element is computed by one thread in the CPU's expression
// order with explicitly rounded operations (no contraction into FMAs the host does not do).
#include <cstdint>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/kernel_common.cuh"
#include "engine/kernels/moe_kernels.hpp"

namespace wsb::dk {
namespace {

using detail::kPointwiseThreads;
using detail::pointwise_blocks;

__device__ inline int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <class Codes>
__global__ void add_bias_kernel(float* x, const uint8_t* __restrict__ bias, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = __fadd_rn(x[i], Codes::at(bias, i));
}

template <class Codes>
__global__ void add_expert_bias_kernel(float* y, int64_t total, int64_t n, const uint8_t* __restrict__ bias,
                                       int64_t bias_stride, const int32_t* __restrict__ ids) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t j = t / n, i = t % n;
    y[t] = __fadd_rn(y[t], Codes::at(bias, static_cast<int64_t>(ids[j]) * bias_stride + i));
  }
}

__global__ void swiglu_slots_kernel(const float* __restrict__ gate_up, int64_t total, int64_t inter, bool up_first,
                                    float* __restrict__ out) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t j = t / inter, i = t % inter;
    const float* row = gate_up + j * 2 * inter;
    const float g = row[(up_first ? inter : 0) + i], u = row[(up_first ? 0 : inter) + i];
    // dense_ops.cpp swiglu: gate / (1 + exp(-gate)) * up
    out[t] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
  }
}

__global__ void clamped_swiglu_kernel(const float* __restrict__ gate_up, int64_t total, int64_t inter,
                                      int64_t in_stride, float limit, float* __restrict__ out) {
  constexpr float kAlpha = 1.702f;  // transformers GptOssExperts.alpha
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t j = t / inter, i = t % inter;
    const float* row = gate_up + j * in_stride;
    // std::min(g, limit) and std::clamp(u, -limit, limit) spelled out, so NaN propagates as on the host.
    float g = row[2 * i], u = row[2 * i + 1];
    g = limit < g ? limit : g;
    u = u < -limit ? -limit : (limit < u ? limit : u);
    const float glu = __fmul_rn(g, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-__fmul_rn(g, kAlpha)))));
    out[t] = __fmul_rn(__fadd_rn(u, 1.0f), glu);
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ expert_out, const float* __restrict__ weights, int slots,
                                   int64_t n, const float* __restrict__ shared, float* __restrict__ out) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float s = 0.0f;
    for (int j = 0; j < slots; ++j) s = __fadd_rn(s, __fmul_rn(expert_out[j * n + i], weights[j]));
    out[i] = shared != nullptr ? __fadd_rn(s, shared[i]) : s;
  }
}

template <class Codes>
__global__ void expert_bias_sum_kernel(const uint8_t* __restrict__ bias, int64_t bias_stride,
                                       const int32_t* __restrict__ ids, const float* __restrict__ weights, int slots,
                                       int64_t n, float* __restrict__ out) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float s = 0.0f;
    for (int j = 0; j < slots; ++j)
      s = __fadd_rn(s, __fmul_rn(Codes::at(bias, static_cast<int64_t>(ids[j]) * bias_stride + i), weights[j]));
    out[i] = s;
  }
}

__global__ void copy_kernel(float* __restrict__ dst, const float* __restrict__ src, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = src[i];
}

}  // namespace

void add_bias(float* x, const uint8_t* bias, WeightType type, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  detail::with_codes(type, [&](auto codes) {
    add_bias_kernel<decltype(codes)><<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(x, bias, n);
  });
  check_launch("add_bias");
}

void add_expert_bias(float* y, int slots, int64_t n, const uint8_t* bias, WeightType type, int64_t bias_stride,
                     const int32_t* ids, cudaStream_t stream) {
  const int64_t total = int64_t{slots} * n;
  if (total <= 0) return;
  detail::with_codes(type, [&](auto codes) {
    add_expert_bias_kernel<decltype(codes)>
        <<<pointwise_blocks(total), kPointwiseThreads, 0, stream>>>(y, total, n, bias, bias_stride, ids);
  });
  check_launch("add_expert_bias");
}

void swiglu_slots(const float* gate_up, int slots, int64_t inter, bool up_first, float* out, cudaStream_t stream) {
  const int64_t total = int64_t{slots} * inter;
  if (total <= 0) return;
  swiglu_slots_kernel<<<pointwise_blocks(total), kPointwiseThreads, 0, stream>>>(gate_up, total, inter, up_first, out);
  check_launch("swiglu_slots");
}

void clamped_swiglu_slots(const float* gate_up, int slots, int64_t inter, int64_t in_stride, float limit, float* out,
                          cudaStream_t stream) {
  const int64_t total = int64_t{slots} * inter;
  if (total <= 0) return;
  clamped_swiglu_kernel<<<pointwise_blocks(total), kPointwiseThreads, 0, stream>>>(gate_up, total, inter, in_stride,
                                                                                  limit, out);
  check_launch("clamped_swiglu_slots");
}

void moe_combine(const float* expert_out, const float* weights, int slots, int64_t n, const float* shared, float* out,
                 cudaStream_t stream) {
  if (n <= 0) return;
  moe_combine_kernel<<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(expert_out, weights, slots, n, shared, out);
  check_launch("moe_combine");
}

void expert_bias_sum(const uint8_t* bias, WeightType type, int64_t bias_stride, const int32_t* ids,
                     const float* weights, int slots, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return;
  detail::with_codes(type, [&](auto codes) {
    expert_bias_sum_kernel<decltype(codes)>
        <<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(bias, bias_stride, ids, weights, slots, n, out);
  });
  check_launch("expert_bias_sum");
}

void copy_floats(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  copy_kernel<<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(dst, src, n);
  check_launch("copy_floats");
}

}  // namespace wsb::dk
