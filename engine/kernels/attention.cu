// Decode attention over a position-major KV cache: one block per local q head, float32, fixed order.
#include <cstdint>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/kernel_common.cuh"

namespace wsb::dk {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <class SinkCodes>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(DecodeAttention a) {
  __shared__ float shared[33];
  const int head = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t pos = *a.position;
  const int64_t first = (a.window > 0 && pos + 1 > a.window) ? pos + 1 - a.window : 0;
  const int64_t length = pos + 1 - first;
  const int kv = (a.q_head_start + head) / a.group - a.kv_head_start;
  const float* q = a.q + static_cast<int64_t>(head) * a.qk_dim;
  const float* k = a.k_cache + first * a.k_stride + static_cast<int64_t>(kv) * a.qk_dim;
  const float* v = a.v_cache + first * a.v_stride + static_cast<int64_t>(kv) * a.v_dim;
  float* scores = a.scores + static_cast<int64_t>(head) * a.scores_stride;

  // Scores: warp w takes positions w, w + 8, ...; its lanes split the dot product (coalesced key reads).
  for (int64_t t = warp; t < length; t += kWarps) {
    const float* kt = k + t * a.k_stride;
    float dot = 0.0f;
    for (int d = lane; d < a.qk_dim; d += 32) dot += q[d] * kt[d];
    dot = detail::warp_sum_lane0(dot);
    if (lane == 0) scores[t] = dot * a.scale;
  }
  __syncthreads();  // scores written by other warps become visible to the whole block

  float m = -INFINITY;
  for (int64_t t = threadIdx.x; t < length; t += kThreads) m = fmaxf(m, scores[t]);
  m = detail::block_reduce(m, true, shared);
  float sink = 0.0f;
  if (a.sinks != nullptr) {
    sink = SinkCodes::at(a.sinks, head);
    m = fmaxf(m, sink);
  }
  float partial = 0.0f;
  for (int64_t t = threadIdx.x; t < length; t += kThreads) {
    const float e = expf(scores[t] - m);
    scores[t] = e;
    partial += e;
  }
  float denom = detail::block_reduce(partial, false, shared);  // its barriers also publish the exp writes
  if (a.sinks != nullptr) denom += expf(sink - m);             // the sink column comes last (moe_ops.cpp)

  // Weighted sum: thread d owns output element d and walks the positions in order (coalesced value reads).
  for (int d = threadIdx.x; d < a.v_dim; d += kThreads) {
    float acc = 0.0f;
    for (int64_t t = 0; t < length; ++t) acc += (scores[t] / denom) * v[t * a.v_stride + d];
    a.out[static_cast<int64_t>(head) * a.v_dim + d] = acc;
  }
}

}  // namespace

void decode_attention(const DecodeAttention& a, cudaStream_t stream) {
  if (a.q_heads <= 0) return;
  detail::with_codes(a.sinks_type, [&](auto codes) {
    decode_attention_kernel<decltype(codes)><<<a.q_heads, kThreads, 0, stream>>>(a);
  });
  check_launch("decode_attention");
}

}  // namespace wsb::dk
