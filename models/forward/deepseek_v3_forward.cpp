// deepseek_v3 reference forward: MLA with naive latent expansion, NVFP4 routed experts (contract: moe_forward.hpp;
// storages: models/layout/moe_layout.hpp).
#include <cmath>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_blocks.hpp"
#include "models/forward/moe_forward.hpp"
#include "models/forward/moe_ops.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

class DeepseekV3Forward final : public MoeForwardBase {
 public:
  DeepseekV3Forward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                    const std::vector<RankStorageView>& storages);

 private:
  struct Layer {
    StorageRef input_norm, q_a_norm, kv_a_norm, post_norm;
    QuantLinear qkv_a, q_b, kv_b, o;
    bool moe = false;
    QuantLinear gate_up, down;  // dense layers
    SigmoidMoeRank experts;     // MoE layers
  };

  void layer(MoeSequence& s, int layer) const override;
  /// One rank's MLA: s.partial = o_proj(attention(s.h)); appends the expanded keys/values to the rank's caches.
  void attention(MoeSequence& s, const Layer& w, std::vector<float>& k_cache, std::vector<float>& v_cache) const;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  int heads_ = 0;                          // per rank
  int nope_ = 0, rope_ = 0, qk_ = 0, v_ = 0;
  float scale_ = 1.0f;
};

DeepseekV3Forward::DeepseekV3Forward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                     const std::vector<RankStorageView>& storages)
    : MoeForwardBase(p, layouts, storages) {
  const ModelDims& d = dims_;
  const int64_t h = d.hidden;
  heads_ = d.heads / tp_;
  nope_ = d.qk_nope_head_dim;
  rope_ = d.qk_rope_head_dim;
  qk_ = mla_qk_head_dim(d);
  v_ = d.v_head_dim;
  // transformers DeepseekV3Attention: scaling = qk_head_dim ** -0.5 (the YaRN mscale factor is not applied,
  // moe_forward.hpp); DeepseekV3RotaryEmbedding runs over qk_rope_head_dim (config.head_dim).
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(qk_)));
  set_inv_freq(rope_inv_freq(d.rope_theta, rope_));
  need_norm(std::max(d.q_lora_rank, d.kv_lora_rank));
  const int64_t a_rows = int64_t{d.q_lora_rank} + d.kv_lora_rank + rope_;
  const int64_t q_rows = int64_t{heads_} * qk_, kv_rows = int64_t{heads_} * (nope_ + v_), o_cols = int64_t{heads_} * v_;
  const int64_t inter = d.intermediate / tp_, im = moe_intermediate_slice(d, tp_, 0).length;
  const int64_t shared = d.shared_experts > 0 ? shared_intermediate(d) / tp_ : 0;
  need_buffer(std::max({a_rows, q_rows, kv_rows, int64_t{d.q_lora_rank}, int64_t{d.kv_lora_rank}, o_cols, h}));
  for (int r = 0; r < tp_; ++r) {
    std::vector<Layer> layers;
    for (int l = 0; l < d.layers; ++l) {
      auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
      auto bf16 = [&](const std::string& name, int64_t rows, int64_t cols) {
        need_buffer(std::max(rows, cols));
        return dense_linear(ref(r, name), rows, cols);
      };
      Layer w;
      w.input_norm = require_storage(ref(r, n("input_layernorm.weight")), p.dtype, {h});
      w.post_norm = require_storage(ref(r, n("post_attention_layernorm.weight")), p.dtype, {h});
      w.q_a_norm = require_storage(ref(r, n("self_attn.q_a_layernorm.weight")), p.dtype, {d.q_lora_rank});
      w.kv_a_norm = require_storage(ref(r, n("self_attn.kv_a_layernorm.weight")), p.dtype, {d.kv_lora_rank});
      w.qkv_a = bf16(n("self_attn.fused_qkv_a_proj_with_mqa.weight"), a_rows, h);
      w.q_b = bf16(n("self_attn.q_b_proj.weight"), q_rows, d.q_lora_rank);
      w.kv_b = bf16(n("self_attn.kv_b_proj.weight"), kv_rows, d.kv_lora_rank);
      w.o = bf16(n("self_attn.o_proj.weight"), h, o_cols);
      w.moe = is_moe_layer(d, l);
      if (!w.moe) {
        w.gate_up = bf16(n("mlp.gate_up_proj.weight"), 2 * inter, h);
        w.down = bf16(n("mlp.down_proj.weight"), h, inter);
      } else {
        SigmoidMoeRank& m = w.experts;
        const std::string e = n("mlp.experts.");
        m.gate = bf16(n("mlp.gate.weight"), d.experts, h);
        m.correction_bias = require_storage(ref(r, n("mlp.gate.e_score_correction_bias")), DType::F32, {d.experts});
        m.w13 = nvfp4_linear(ref(r, e + "w13_weight"), ref(r, e + "w13_weight_scale"), ref(r, e + "w13_alpha"),
                             ref(r, e + "w13_input_scale"), 2 * im, h, 0);
        // A w2 shard starting inside a 16-block reads its first scale column at that block's phase
        // (nvfp4_w2_scale_columns).
        const int64_t k_phase = moe_intermediate_slice(d, tp_, r).start % kNvfp4Block;
        m.w2 = nvfp4_linear(ref(r, e + "w2_weight"), ref(r, e + "w2_weight_scale"), ref(r, e + "w2_alpha"),
                            ref(r, e + "w2_input_scale"), h, im, k_phase);
        need_buffer(std::max({2 * im, h}));
        m.up_first = true;  // FlashInfer CUTLASS w13 = [up; gate] (moe_layout.hpp)
        m.has_shared = shared > 0;
        if (m.has_shared) {
          m.shared_gate_up = bf16(n("mlp.shared_experts.gate_up_proj.weight"), 2 * shared, h);
          m.shared_down = bf16(n("mlp.shared_experts.down_proj.weight"), h, shared);
        }
      }
      layers.push_back(w);
    }
    ranks_.push_back(std::move(layers));
  }
}

void DeepseekV3Forward::attention(MoeSequence& s, const Layer& w, std::vector<float>& k_cache,
                                  std::vector<float>& v_cache) const {
  const ModelDims& d = dims_;
  float* a = s.a.data();  // [q_lora | latent | k_rope]
  linear_matvec(w.qkv_a, 0, s.h.data(), a, s.scratch.data());
  float* q = s.b.data();  // heads x [nope | rope]
  rms(s, a, w.q_a_norm, d.q_lora_rank, s.c.data());
  linear_matvec(w.q_b, 0, s.c.data(), q, s.scratch.data());
  float* kv = s.d.data();  // heads x [k_nope | v]
  rms(s, a + d.q_lora_rank, w.kv_a_norm, d.kv_lora_rank, s.c.data());
  linear_matvec(w.kv_b, 0, s.c.data(), kv, s.scratch.data());
  float* k_rope = a + d.q_lora_rank + d.kv_lora_rank;
  apply_rope_interleaved(k_rope, rope_, s.cos.data(), s.sin.data(), s.scratch.data());
  for (int i = 0; i < heads_; ++i)
    apply_rope_interleaved(q + int64_t{i} * qk_ + nope_, rope_, s.cos.data(), s.sin.data(), s.scratch.data());
  // Naive expansion: each head's key is [k_nope | shared k_rope], its value v; both cached per head.
  const size_t k_at = k_cache.size(), v_at = v_cache.size();
  k_cache.resize(k_at + static_cast<size_t>(heads_ * qk_));
  v_cache.resize(v_at + static_cast<size_t>(heads_ * v_));
  for (int i = 0; i < heads_; ++i) {
    const float* head = kv + int64_t{i} * (nope_ + v_);
    float* key = k_cache.data() + k_at + static_cast<size_t>(i * qk_);
    std::copy(head, head + nope_, key);
    std::copy(k_rope, k_rope + rope_, key + nope_);
    std::copy(head + nope_, head + nope_ + v_, v_cache.data() + v_at + static_cast<size_t>(i * v_));
  }
  float* out = s.c.data();  // heads x v
  for (int i = 0; i < heads_; ++i)
    attend_head_window(q + int64_t{i} * qk_, k_cache.data() + int64_t{i} * qk_, int64_t{heads_} * qk_, qk_,
                       v_cache.data() + int64_t{i} * v_, int64_t{heads_} * v_, v_, 0, s.pos + 1, scale_, nullptr,
                       s.scores.data(), out + int64_t{i} * v_);
  linear_matvec(w.o, 0, out, s.partial.data(), s.scratch.data());
}

void DeepseekV3Forward::layer(MoeSequence& s, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).input_norm; },
      [&](int r) { attention(s, at(r), s.k[cache_index(r, l)], s.v[cache_index(r, l)]); });
  add_residual(s);
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).post_norm; },
      [&](int r) { sigmoid_family_mlp_partial(dims_, at(r), s); });
  add_residual(s);
}

}  // namespace

std::unique_ptr<ForwardModel> make_deepseek_v3_forward(const ModelProfile& profile,
                                                       const std::vector<RankLayout>& layouts,
                                                       const std::vector<RankStorageView>& storages) {
  return std::make_unique<DeepseekV3Forward>(profile, layouts, storages);
}

}  // namespace wsb
