#include "models/forward/moe_blocks.hpp"

#include <algorithm>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_ops.hpp"

namespace wsb {

void gqa_attention_partial(const GqaParams& p, const GqaRank& w, std::vector<float>& k_cache,
                           std::vector<float>& v_cache, MoeSequence& s) {
  const LlamaRankHeads& h = w.heads;
  const int hd = p.head_dim;
  const int64_t q_rows = int64_t{h.q_heads} * hd, kv_rows = int64_t{h.kv_heads} * hd;
  float* qkv = s.a.data();
  linear_matvec(w.qkv, 0, s.h.data(), qkv, s.scratch.data());
  if (w.qkv_bias.data != nullptr) {
    p.kern->load_row(w.qkv_bias.data, 0, q_rows + 2 * kv_rows, s.c.data());
    for (int64_t i = 0; i < q_rows + 2 * kv_rows; ++i) qkv[i] += s.c[static_cast<size_t>(i)];
  }
  float* q = qkv;
  float* k = q + q_rows;
  const float* v = k + kv_rows;
  apply_partial_rope(q, h.q_heads, hd, p.rotary_dim, s.cos.data(), s.sin.data());
  apply_partial_rope(k, h.kv_heads, hd, p.rotary_dim, s.cos.data(), s.sin.data());
  k_cache.insert(k_cache.end(), k, k + kv_rows);
  v_cache.insert(v_cache.end(), v, v + kv_rows);
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, s.pos + 1 - p.window) : 0;
  const int64_t length = s.pos + 1 - first;
  const bool sinks = w.sinks.data != nullptr;
  if (sinks) p.kern->load_row(w.sinks.data, 0, h.q_heads, s.c.data());
  const int group = p.heads / p.kv_heads;
  for (int i = 0; i < h.q_heads; ++i) {
    const int kv_local = (h.q_head_start + i) / group - h.kv_head_start;
    const float* kc = k_cache.data() + int64_t{kv_local} * hd;
    const float* vc = v_cache.data() + int64_t{kv_local} * hd;
    float* out = s.b.data() + int64_t{i} * hd;
    if (first == 0 && !sinks) {
      attend_head(q + int64_t{i} * hd, kc, vc, length, kv_rows, hd, p.scale, s.scores.data(), out);
    } else {
      attend_head_window(q + int64_t{i} * hd, kc, kv_rows, hd, vc, kv_rows, hd, first, length, p.scale,
                         sinks ? &s.c[static_cast<size_t>(i)] : nullptr, s.scores.data(), out);
    }
  }
  linear_matvec(w.o, 0, s.b.data(), s.partial.data(), s.scratch.data());
}

void swiglu_mlp(const QuantLinear& gate_up, const QuantLinear& down, int64_t expert, bool up_first, const float* x,
                MoeSequence& s, float* out) {
  const int64_t inter = gate_up.rows / 2;
  linear_matvec(gate_up, expert, x, s.a.data(), s.scratch.data());
  const float* gate = s.a.data() + (up_first ? inter : 0);
  const float* up = s.a.data() + (up_first ? 0 : inter);
  swiglu(gate, up, inter, s.b.data());
  linear_matvec(down, expert, s.b.data(), out, s.scratch.data());
}

void sort_selected_by_expert(MoeSequence& s, int n) {
  for (int i = 1; i < n; ++i) {
    for (int j = i; j > 0 && s.experts[static_cast<size_t>(j)] < s.experts[static_cast<size_t>(j - 1)]; --j) {
      std::swap(s.experts[static_cast<size_t>(j)], s.experts[static_cast<size_t>(j - 1)]);
      std::swap(s.weights[static_cast<size_t>(j)], s.weights[static_cast<size_t>(j - 1)]);
    }
  }
}

void sigmoid_moe_partial(const ModelDims& dims, const SigmoidMoeRank& w, MoeSequence& s) {
  const int experts = dims.experts, top_k = dims.top_k;
  linear_matvec(w.gate, 0, s.h.data(), s.router.data(), s.scratch.data());
  read_f32(w.correction_bias, experts, s.router_bias.data());
  sigmoid_topk_route(s.router.data(), s.router_bias.data(), experts, top_k, dims.norm_topk_prob,
                     static_cast<float>(dims.routed_scaling_factor), s.experts.data(), s.weights.data(),
                     s.router_scratch.data());
  sort_selected_by_expert(s, top_k);
  std::fill(s.routed.begin(), s.routed.end(), 0.0f);
  for (int j = 0; j < top_k; ++j) {
    swiglu_mlp(w.w13, w.w2, s.experts[static_cast<size_t>(j)], w.up_first, s.h.data(), s, s.expert_out.data());
    const float weight = s.weights[static_cast<size_t>(j)];
    for (size_t i = 0; i < s.routed.size(); ++i) s.routed[i] += s.expert_out[i] * weight;
  }
  if (!w.has_shared) {
    s.partial = s.routed;
    return;
  }
  swiglu_mlp(w.shared_gate_up, w.shared_down, 0, false, s.h.data(), s, s.partial.data());
  for (size_t i = 0; i < s.partial.size(); ++i) s.partial[i] = s.routed[i] + s.partial[i];
}

void sigmoid_family_mlp_partial(const ModelDims& dims, const SigmoidFamilyMlp& w, MoeSequence& s) {
  if (w.moe) {
    sigmoid_moe_partial(dims, w.experts, s);
  } else {
    swiglu_mlp(w.gate_up, w.down, 0, false, s.h.data(), s, s.partial.data());
  }
}

}  // namespace wsb
