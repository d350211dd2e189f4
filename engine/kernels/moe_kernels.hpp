#pragma once
// Float32 kernels the MoE families' device forwards add to device_kernels.hpp: biases, the two routers, the
// SwiGLU variants over several expert slots, the weighted expert sum, interleaved RoPE and the MLA key/value
// expansion. They are the CUDA twins of models/forward/moe_ops.hpp and the loops of moe_blocks.cpp /
// gpt_oss_forward.cpp, and follow the conventions of device_kernels.hpp (device pointers on the current device,
// no allocation, no synchronization, graph-capturable, Error(Io) "launching kernel <name>: ..." on a failed
// launch). C++17-clean so the .cu files and the C++20 glue share it.
//
// Element-wise arithmetic uses explicitly rounded operations (__fmul_rn, __fadd_rn, ...) in the CPU forward's
// expression order, so nvcc cannot contract a product and a sum into one fused multiply-add the host code (x86-64
// without FMA) does not do: given equal inputs, these kernels give the host's bits except where expf/cosf/sinf
// differ from the host libm (CUDA: at most 2 ulp).
//
// Routing: the chosen experts and their weights stay in device memory (int32 ids, float weights, `top_k` each,
// sorted by ascending expert id as sort_selected_by_expert leaves them), so they feed launch_linear_matvec's
// expert ids inside a captured graph and no routing decision ever reaches the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/device_kernels.hpp"

namespace wsb::dk {

/// Most experts the routers take (their per-expert values live in shared memory) and most chosen experts.
inline constexpr int kMaxRouterExperts = 1024;
inline constexpr int kMaxTopK = 32;

/// x[i] = x[i] + float(bias[i]) for i < n (stored weights of `type`). One bias row for every call.
void add_bias(float* x, const uint8_t* bias, WeightType type, int64_t n, cudaStream_t stream);

/// Per expert slot j < slots: y[j * n + i] = y[j * n + i] + float(bias[ids[j] * bias_stride + i]) for i < n, with
/// `bias` a stacked [experts, bias_stride] storage of `type` and `ids` device int32 expert ids (gpt_oss w13 bias).
void add_expert_bias(float* y, int slots, int64_t n, const uint8_t* bias, WeightType type, int64_t bias_stride,
                     const int32_t* ids, cudaStream_t stream);

/// noaux_tc routing of glm4_moe / deepseek_v3 (moe_ops.hpp sigmoid_topk_route, then ascending expert order):
/// scores = sigmoid(logits), choice = scores + correction_bias (F32 [experts], device), top_k of choice (ties to
/// the lower index), weights = the chosen scores, / (sum in selection order + 1e-20) when `normalize`, * scaling.
/// Writes `top_k` ids and weights sorted by ascending id. One warp. Throws Error(Mismatch) for experts outside
/// [1, kMaxRouterExperts] or top_k outside [1, min(experts, kMaxTopK)].
void sigmoid_topk_route(const float* logits, const float* correction_bias, int experts, int top_k, bool normalize,
                        float scaling, int32_t* ids, float* weights, cudaStream_t stream);

/// gpt-oss routing (moe_ops.hpp softmax_topk_route on logits + router bias, then ascending expert order):
/// l_i = logits[i] + float(bias[i]) (`bias` [experts] stored weights of `type`), top_k of l (ties to the lower
/// index), weights = softmax over the chosen l (max = the first chosen, sum in selection order). Output and
/// errors as sigmoid_topk_route.
void softmax_topk_route(const float* logits, const uint8_t* bias, WeightType type, int experts, int top_k,
                        int32_t* ids, float* weights, cudaStream_t stream);

/// SwiGLU of `slots` stacked gate_up outputs (dense_ops.hpp swiglu): slot j reads gate_up + j * 2 * inter as
/// [gate; up] ([up; gate] when `up_first`, FlashInfer's NVFP4 w13) and writes out[j * inter + i] =
/// gate / (1 + exp(-gate)) * up. out must not alias gate_up.
void swiglu_slots(const float* gate_up, int slots, int64_t inter, bool up_first, float* out, cudaStream_t stream);

/// gpt-oss clamped SwiGLU (moe_ops.hpp clamped_swiglu_interleaved) of `slots` interleaved gate_up rows: slot j
/// reads gate_up + j * in_stride (gate = [2i], up = [2i + 1]) and writes out[j * inter + i] =
/// (clamp(up, -limit, limit) + 1) * g * sigmoid(1.702 g), g = min(gate, limit).
void clamped_swiglu_slots(const float* gate_up, int slots, int64_t inter, int64_t in_stride, float limit, float* out,
                          cudaStream_t stream);

/// Weighted expert sum (moe_blocks.cpp sigmoid_moe_partial, gpt_oss experts): s = 0; for j < slots in order:
/// s = s + expert_out[j * n + i] * weights[j]; out[i] = shared ? s + shared[i] : s. slots == 0 writes the
/// shared values (or zeros). out must not alias expert_out.
void moe_combine(const float* expert_out, const float* weights, int slots, int64_t n, const float* shared, float* out,
                 cudaStream_t stream);

/// Routing-weighted sum of stacked bias rows (gpt_oss down_proj bias, added once after the TP reduction):
/// out[i] = sum over j < slots in order of float(bias[ids[j] * bias_stride + i]) * weights[j], from 0.
void expert_bias_sum(const uint8_t* bias, WeightType type, int64_t bias_stride, const int32_t* ids,
                     const float* weights, int slots, int64_t n, float* out, cudaStream_t stream);

/// Interleaved RoPE (moe_ops.hpp apply_rope_interleaved) of `vectors` vectors of `dim` floats at x + v * stride,
/// in place: pair (x[2i], x[2i + 1]) becomes (x'[i], x'[i + dim/2]) = (a c - b s, b c + a s), angle_i =
/// inv_freq[i] * float(*position), cos and sin multiplied by `cos_sin_scale` (YaRN attention scaling, 1 for plain
/// RoPE). One block per vector; dim even, <= 2048.
void rope_interleaved(float* x, int vectors, int64_t stride, int dim, const float* inv_freq, const int32_t* position,
                      float cos_sin_scale, cudaStream_t stream);

/// MLA naive expansion of one position into per-head caches (deepseek_v3_forward.cpp attention): for head h <
/// heads, key = [kv[h * (nope + v_dim) + 0 .. nope) | k_rope[0 .. rope)] at k_cache + *position * heads *
/// (nope + rope) + h * (nope + rope), value = kv[h * (nope + v_dim) + nope ..] (v_dim floats) at v_cache +
/// *position * heads * v_dim + h * v_dim.
void mla_store_kv(const float* kv, const float* k_rope, int heads, int nope, int rope, int v_dim,
                  const int32_t* position, float* k_cache, float* v_cache, cudaStream_t stream);

/// dst[i] = src[i] for i < n (device to device on `stream`; a kernel, so it records into a graph as one node).
void copy_floats(float* dst, const float* src, int64_t n, cudaStream_t stream);

}  // namespace wsb::dk
