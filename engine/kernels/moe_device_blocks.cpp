#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/moe_device_blocks.hpp"

#include <algorithm>

#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/moe_kernels.hpp"
#include "engine/quant/device_linear_bind.hpp"

namespace wsb::dk {

DeviceGqaRank to_device(const GqaRank& w) {
  DeviceGqaRank d;
  d.heads = w.heads;
  d.qkv = to_device_linear(w.qkv);
  d.qkv_bias = w.qkv_bias.data;
  d.o = to_device_linear(w.o);
  d.sinks = w.sinks.data;
  return d;
}

DeviceSigmoidFamilyMlp to_device(const SigmoidFamilyMlp& w) {
  DeviceSigmoidFamilyMlp d;
  d.post_norm = w.post_norm.data;
  d.moe = w.moe;
  if (!d.moe) {
    d.dense.gate_up = to_device_linear(w.gate_up);
    d.dense.down = to_device_linear(w.down);
    return d;
  }
  const SigmoidMoeRank& e = w.experts;
  DeviceSigmoidMoe& x = d.experts;
  x.gate = to_device_linear(e.gate);
  x.correction_bias = reinterpret_cast<const float*>(e.correction_bias.data);
  x.w13 = to_device_linear(e.w13);
  x.w2 = to_device_linear(e.w2);
  x.up_first = e.up_first;
  x.has_shared = e.has_shared;
  if (x.has_shared) {
    x.shared.gate_up = to_device_linear(e.shared_gate_up);
    x.shared.down = to_device_linear(e.shared_down);
  }
  return d;
}

void need_gqa(MoeBufferSizes& sizes, const DeviceGqaParams& p, const LlamaRankHeads& heads) {
  const int64_t q_rows = int64_t{heads.q_heads} * p.head_dim, kv_rows = int64_t{heads.kv_heads} * p.head_dim;
  sizes.scratch = std::max(sizes.scratch, q_rows + 2 * kv_rows);
  sizes.q_heads = std::max<int64_t>(sizes.q_heads, heads.q_heads);
  sizes.k_width = std::max(sizes.k_width, kv_rows);
  sizes.v_width = std::max(sizes.v_width, kv_rows);
}

void gqa_attention(const DeviceGqaParams& p, const DeviceGqaRank& w, const MoeRankBuffers& s, int layer,
                   const int32_t* position, const float* inv_freq, int max_positions, float* out,
                   cudaStream_t stream) {
  const LlamaRankHeads& h = w.heads;
  const int hd = p.head_dim;
  const int64_t q_rows = int64_t{h.q_heads} * hd, kv_rows = int64_t{h.kv_heads} * hd;
  float* qkv = s.a;
  launch_linear_matvec(w.qkv, nullptr, 1, s.h, 0, qkv, stream);
  if (w.qkv_bias != nullptr) add_bias(qkv, w.qkv_bias, p.type, q_rows + 2 * kv_rows, stream);
  // q heads and k heads are consecutive head_dim-wide vectors: one launch rotates both.
  rope(qkv, h.q_heads + h.kv_heads, hd, p.rotary_dim, inv_freq, position, p.rope_scale, stream);
  float* k_cache = s.k[static_cast<size_t>(layer)];
  float* v_cache = s.v[static_cast<size_t>(layer)];
  store_kv(qkv + q_rows, qkv + q_rows + kv_rows, kv_rows, position, k_cache, v_cache, stream);
  DecodeAttention a = gqa_decode_attention(p, h, qkv, k_cache, v_cache, position, s.scores, max_positions, s.b);
  a.sinks = w.sinks;
  a.sinks_type = p.type;
  decode_attention(a, stream);
  launch_linear_matvec(w.o, nullptr, 1, s.b, 0, out, stream);
}

void need_mlp(MoeBufferSizes& sizes, int64_t inter) {
  sizes.gate_up = std::max(sizes.gate_up, 2 * inter);
  sizes.act = std::max(sizes.act, inter);
}

void swiglu_mlp(const DeviceMlp& w, const float* x, const MoeRankBuffers& s, float* out, cudaStream_t stream) {
  const int64_t inter = w.gate_up.rows / 2;
  launch_linear_matvec(w.gate_up, nullptr, 1, x, 0, s.gate_up, stream);
  swiglu_slots(s.gate_up, 1, inter, false, s.act, stream);
  launch_linear_matvec(w.down, nullptr, 1, s.act, 0, out, stream);
}

void need_routed_experts(MoeBufferSizes& sizes, int top_k, int64_t inter) {
  sizes.gate_up = std::max(sizes.gate_up, int64_t{top_k} * 2 * inter);
  sizes.act = std::max(sizes.act, int64_t{top_k} * inter);
}

void sigmoid_moe(const ModelDims& dims, const DeviceSigmoidMoe& w, const MoeRankBuffers& s, float* out,
                 cudaStream_t stream) {
  const int top_k = dims.top_k;
  const int64_t inter = w.w13.rows / 2;
  launch_linear_matvec(w.gate, nullptr, 1, s.h, 0, s.logits, stream);
  sigmoid_topk_route(s.logits, w.correction_bias, dims.experts, top_k, dims.norm_topk_prob,
                     static_cast<float>(dims.routed_scaling_factor), s.ids, s.weights, stream);
  // Slot j of every projection is expert s.ids[j]: every slot reads s.h (x_stride 0), the down projection reads
  // slot j's activations (x_stride inter).
  launch_linear_matvec(w.w13, s.ids, top_k, s.h, 0, s.gate_up, stream);
  swiglu_slots(s.gate_up, top_k, inter, w.up_first, s.act, stream);
  launch_linear_matvec(w.w2, s.ids, top_k, s.act, inter, s.expert_out, stream);
  if (w.has_shared) swiglu_mlp(w.shared, s.h, s, s.shared_out, stream);
  moe_combine(s.expert_out, s.weights, top_k, dims.hidden, w.has_shared ? s.shared_out : nullptr, out, stream);
}

void sigmoid_family_mlp(const ModelDims& dims, WeightType type, float eps, const DeviceSigmoidFamilyMlp& w,
                        const float* x, const MoeRankBuffers& s, float* out, cudaStream_t stream) {
  rms_norm(x, w.post_norm, type, dims.hidden, eps, s.h, stream);
  if (w.moe) {
    sigmoid_moe(dims, w.experts, s, out, stream);
  } else {
    swiglu_mlp(w.dense, s.h, s, out, stream);
  }
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
