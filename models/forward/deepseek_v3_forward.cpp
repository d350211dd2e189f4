// deepseek_v3 reference forward: MLA with naive latent expansion, NVFP4 routed experts (contract: moe_forward.hpp;
// storages: models/layout/moe_layout.hpp).
#include <algorithm>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_blocks.hpp"
#include "models/forward/moe_forward.hpp"
#include "models/forward/moe_ops.hpp"

namespace wsb {

namespace {

class DeepseekV3Forward final : public MoeForwardBase {
 public:
  DeepseekV3Forward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                    const std::vector<RankStorageView>& storages);

 private:
  using Layer = DeepseekV3LayerWeights;

  void layer(MoeSequence& s, int layer) const override;
  /// One rank's MLA: s.partial = o_proj(attention(s.h)); appends the expanded keys/values to the rank's caches.
  void attention(MoeSequence& s, const Layer& w, std::vector<float>& k_cache, std::vector<float>& v_cache) const;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  MlaShape mla_;
};

DeepseekV3Forward::DeepseekV3Forward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                     const std::vector<RankStorageView>& storages)
    : MoeForwardBase(p, layouts, storages), mla_(deepseek_v3_attention(dims_, tp_)) {
  const ModelDims& d = dims_;
  const MlaShape& m = mla_;
  // DeepseekV3RotaryEmbedding runs over qk_rope_head_dim (config.head_dim), with YaRN when rope_scaling says so; the
  // softmax scale carries YaRN's mscale^2 (deepseek_v3_attention).
  set_rope(rope_frequencies(d.rope_theta, m.rope, d.rope_scaling));
  need_norm(std::max(d.q_lora_rank, d.kv_lora_rank));
  need_buffer(std::max({m.a_rows, m.q_rows, m.kv_rows, int64_t{d.q_lora_rank}, int64_t{d.kv_lora_rank}, m.o_cols,
                        int64_t{d.hidden}}));
  for (int r = 0; r < tp_; ++r) {
    ranks_.push_back(bind_deepseek_v3_rank(p, rank_storages(), r));
    for (const Layer& w : ranks_.back()) {
      const SigmoidMoeRank& e = w.mlp.experts;
      need_linears({&w.qkv_a, &w.q_b, &w.kv_b, &w.o, &w.mlp.gate_up, &w.mlp.down, &e.gate, &e.w13, &e.w2,
                    &e.shared_gate_up, &e.shared_down});
    }
  }
}

void DeepseekV3Forward::attention(MoeSequence& s, const Layer& w, std::vector<float>& k_cache,
                                  std::vector<float>& v_cache) const {
  const ModelDims& d = dims_;
  const int heads = mla_.heads, nope = mla_.nope, rope = mla_.rope, qk = mla_.qk, v = mla_.v;
  float* a = s.a.data();  // [q_lora | latent | k_rope]
  linear_matvec(w.qkv_a, 0, s.h.data(), a, s.scratch.data());
  float* q = s.b.data();  // heads x [nope | rope]
  rms(s, a, w.q_a_norm, d.q_lora_rank, s.c.data());
  linear_matvec(w.q_b, 0, s.c.data(), q, s.scratch.data());
  float* kv = s.d.data();  // heads x [k_nope | v]
  rms(s, a + d.q_lora_rank, w.kv_a_norm, d.kv_lora_rank, s.c.data());
  linear_matvec(w.kv_b, 0, s.c.data(), kv, s.scratch.data());
  float* k_rope = a + d.q_lora_rank + d.kv_lora_rank;
  apply_rope_interleaved(k_rope, rope, s.cos.data(), s.sin.data(), s.scratch.data());
  for (int i = 0; i < heads; ++i)
    apply_rope_interleaved(q + int64_t{i} * qk + nope, rope, s.cos.data(), s.sin.data(), s.scratch.data());
  // Naive expansion: each head's key is [k_nope | shared k_rope], its value v; both cached per head.
  const size_t k_at = k_cache.size(), v_at = v_cache.size();
  k_cache.resize(k_at + static_cast<size_t>(heads * qk));
  v_cache.resize(v_at + static_cast<size_t>(heads * v));
  for (int i = 0; i < heads; ++i) {
    const float* head = kv + int64_t{i} * (nope + v);
    float* key = k_cache.data() + k_at + static_cast<size_t>(i * qk);
    std::copy(head, head + nope, key);
    std::copy(k_rope, k_rope + rope, key + nope);
    std::copy(head + nope, head + nope + v, v_cache.data() + v_at + static_cast<size_t>(i * v));
  }
  float* out = s.c.data();  // heads x v
  for (int i = 0; i < heads; ++i)
    attend_head_window(q + int64_t{i} * qk, k_cache.data() + int64_t{i} * qk, int64_t{heads} * qk, qk,
                       v_cache.data() + int64_t{i} * v, int64_t{heads} * v, v, 0, s.pos + 1, mla_.scale, nullptr,
                       s.scores.data(), out + int64_t{i} * v);
  linear_matvec(w.o, 0, out, s.partial.data(), s.scratch.data());
}

void DeepseekV3Forward::layer(MoeSequence& s, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  sigmoid_family_layer(
      s, [&](int r) -> const StorageRef& { return at(r).input_norm; },
      [&](int r) { attention(s, at(r), s.k[cache_index(r, l)], s.v[cache_index(r, l)]); },
      [&](int r) -> const SigmoidFamilyMlp& { return at(r).mlp; });
}

}  // namespace

std::unique_ptr<ForwardModel> make_deepseek_v3_forward(const ModelProfile& profile,
                                                       const std::vector<RankLayout>& layouts,
                                                       const std::vector<RankStorageView>& storages) {
  return std::make_unique<DeepseekV3Forward>(profile, layouts, storages);
}

}  // namespace wsb
