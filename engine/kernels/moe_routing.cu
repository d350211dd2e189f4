// The MoE routers of the device forward (moe_kernels.hpp): one warp computes the per-expert selection values, picks
// the top_k by repeated warp arg-max, and lane 0 finishes the weights and the ascending-id order serially, exactly
// in the CPU's order (moe_ops.cpp sigmoid_topk_route / softmax_topk_route, moe_blocks.cpp sort_selected_by_expert).
#include <cstdint>
#include <string>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/kernel_common.cuh"
#include "engine/kernels/moe_kernels.hpp"
#include "core/errors.hpp"

namespace wsb::dk {
namespace {

constexpr int kWarp = 32;

enum class Router { Sigmoid, Softmax };

/// Index of the largest not-yet-chosen `values` entry, ties to the lower index: the result of moe_ops.cpp
/// top_k_indices' scan (best = first unchosen index; replaced only by a strictly larger value). NaN entries never
/// replace, so the scan's answer is the first unchosen index when that one is NaN, else the arg-max over the
/// non-NaN entries with ties to the lower index. The warp computes the latter with a butterfly over a total order
/// (value, then lower index), so every lane ends with the same answer whatever the combination order.
__device__ int warp_pick(const float* values, const unsigned char* chosen, int n) {
  const int lane = static_cast<int>(threadIdx.x);
  float best_v = 0.0f;
  int best_i = -1;
  for (int i = lane; i < n; i += kWarp) {
    const float v = values[i];
    if (chosen[i] || isnan(v)) continue;
    if (best_i < 0 || v > best_v) {
      best_v = v;
      best_i = i;
    }
  }
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    const float other_v = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int other_i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    const bool take = other_i >= 0 && (best_i < 0 || other_v > best_v || (other_v == best_v && other_i < best_i));
    if (take) {
      best_v = other_v;
      best_i = other_i;
    }
  }
  int first = 0;
  while (chosen[first]) ++first;  // top_k <= n, so an unchosen index exists
  return isnan(values[first]) ? first : best_i;
}

template <Router R, class BiasCodes>
__global__ void __launch_bounds__(kWarp)
    route_kernel(const float* __restrict__ logits, const uint8_t* __restrict__ bias, int n, int top_k,
                 bool normalize, float scaling, int32_t* __restrict__ ids, float* __restrict__ weights) {
  __shared__ float score[kMaxRouterExperts];   // sigmoid: sigmoid(logit); softmax: logit + bias
  __shared__ float choice[kMaxRouterExperts];  // the values top-k selects on
  __shared__ unsigned char chosen[kMaxRouterExperts];
  __shared__ int picked[kMaxTopK];
  __shared__ float w[kMaxTopK];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < n; i += kWarp) {
    const float l = logits[i];
    if constexpr (R == Router::Sigmoid) {
      const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-l)));
      score[i] = s;
      choice[i] = __fadd_rn(s, reinterpret_cast<const float*>(bias)[i]);
    } else {
      const float v = __fadd_rn(l, BiasCodes::at(bias, i));
      score[i] = v;
      choice[i] = v;
    }
    chosen[i] = 0;
  }
  __syncwarp();
  for (int j = 0; j < top_k; ++j) {
    const int best = warp_pick(choice, chosen, n);
    if (lane == 0) {
      picked[j] = best;
      chosen[best] = 1;
    }
    __syncwarp();
  }
  if (lane != 0) return;
  if constexpr (R == Router::Sigmoid) {
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      w[j] = score[picked[j]];
      sum = __fadd_rn(sum, w[j]);
    }
    if (normalize) {
      const float denom = __fadd_rn(sum, 1e-20f);
      for (int j = 0; j < top_k; ++j) w[j] = __fdiv_rn(w[j], denom);
    }
    for (int j = 0; j < top_k; ++j) w[j] = __fmul_rn(w[j], scaling);
  } else {
    const float max_logit = score[picked[0]];  // selection order is descending
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      w[j] = expf(__fsub_rn(score[picked[j]], max_logit));
      sum = __fadd_rn(sum, w[j]);
    }
    for (int j = 0; j < top_k; ++j) w[j] = __fdiv_rn(w[j], sum);
  }
  // Insertion sort by expert id (ids are distinct), carrying the weights: sort_selected_by_expert.
  for (int i = 1; i < top_k; ++i) {
    for (int j = i; j > 0 && picked[j] < picked[j - 1]; --j) {
      const int e = picked[j];
      picked[j] = picked[j - 1];
      picked[j - 1] = e;
      const float t = w[j];
      w[j] = w[j - 1];
      w[j - 1] = t;
    }
  }
  for (int j = 0; j < top_k; ++j) {
    ids[j] = picked[j];
    weights[j] = w[j];
  }
}

void check_router(const char* name, int experts, int top_k) {
  if (experts < 1 || experts > kMaxRouterExperts || top_k < 1 || top_k > experts || top_k > kMaxTopK)
    throw Error(ErrorKind::Mismatch, std::string(name) + ": " + std::to_string(experts) + " experts, top_k " +
                                         std::to_string(top_k) + " (supported: 1.." +
                                         std::to_string(kMaxRouterExperts) + " experts, top_k 1..min(experts, " +
                                         std::to_string(kMaxTopK) + "))");
}

}  // namespace

void sigmoid_topk_route(const float* logits, const float* correction_bias, int experts, int top_k, bool normalize,
                        float scaling, int32_t* ids, float* weights, cudaStream_t stream) {
  check_router("sigmoid_topk_route", experts, top_k);
  route_kernel<Router::Sigmoid, detail::F32><<<1, kWarp, 0, stream>>>(
      logits, reinterpret_cast<const uint8_t*>(correction_bias), experts, top_k, normalize, scaling, ids, weights);
  check_launch("sigmoid_topk_route");
}

void softmax_topk_route(const float* logits, const uint8_t* bias, WeightType type, int experts, int top_k,
                        int32_t* ids, float* weights, cudaStream_t stream) {
  check_router("softmax_topk_route", experts, top_k);
  detail::with_codes(type, [&](auto codes) {
    route_kernel<Router::Softmax, decltype(codes)>
        <<<1, kWarp, 0, stream>>>(logits, bias, experts, top_k, false, 1.0f, ids, weights);
  });
  check_launch("softmax_topk_route");
}

}  // namespace wsb::dk
