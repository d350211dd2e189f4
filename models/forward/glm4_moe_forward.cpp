// glm4_moe reference forward (contract: moe_forward.hpp; storages: models/layout/moe_layout.hpp).
#include <cmath>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_blocks.hpp"
#include "models/forward/moe_forward.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

class Glm4MoeForward final : public MoeForwardBase {
 public:
  Glm4MoeForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                 const std::vector<RankStorageView>& storages);

 private:
  struct Layer {
    StorageRef input_norm, post_norm;
    GqaRank attn;
    bool moe = false;
    QuantLinear gate_up, down;  // dense layers
    SigmoidMoeRank experts;     // MoE layers
  };

  void layer(MoeSequence& s, int layer) const override;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  GqaParams attn_;
};

Glm4MoeForward::Glm4MoeForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                               const std::vector<RankStorageView>& storages)
    : MoeForwardBase(p, layouts, storages) {
  const ModelDims& d = dims_;
  const int64_t h = d.hidden, hd = d.head_dim;
  // transformers Glm4MoeRotaryEmbedding: dim = int(head_dim * partial_rotary_factor) (moe_dims.cpp checks it is an
  // even integer).
  const int rotary = static_cast<int>(d.head_dim * d.partial_rotary_factor);
  attn_ = GqaParams{d.heads, d.kv_heads, d.head_dim, rotary, 0,
                    static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim))), kern_};
  set_inv_freq(rope_inv_freq(d.rope_theta, rotary));
  const int64_t inter = d.intermediate / tp_, im = moe_intermediate_slice(d, tp_, 0).length;
  const int64_t shared = d.shared_experts > 0 ? shared_intermediate(d) / tp_ : 0;
  for (int r = 0; r < tp_; ++r) {
    std::vector<Layer> layers;
    const LlamaRankHeads heads = llama_rank_heads(d, tp_, r);
    const int64_t q_rows = heads.q_heads * hd, qkv_rows = q_rows + 2 * int64_t{heads.kv_heads} * hd;
    need_buffer(qkv_rows);
    for (int l = 0; l < d.layers; ++l) {
      auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
      // "<base><sep>weight" and "<base><sep>weight_scale": sep "." for linears, "_" for the stacked experts.
      auto fp8 = [&](const std::string& base, int64_t rows, int64_t cols, const char* sep = ".") {
        need_buffer(std::max(rows, cols));
        return fp8_linear(ref(r, base + sep + "weight"), ref(r, base + sep + "weight_scale"), rows, cols);
      };
      Layer w;
      w.input_norm = require_storage(ref(r, n("input_layernorm.weight")), p.dtype, {h});
      w.post_norm = require_storage(ref(r, n("post_attention_layernorm.weight")), p.dtype, {h});
      w.attn.heads = heads;
      w.attn.qkv = fp8(n("self_attn.qkv_proj"), qkv_rows, h);
      if (d.attention_bias)
        w.attn.qkv_bias = require_storage(ref(r, n("self_attn.qkv_proj.bias")), p.dtype, {qkv_rows});
      w.attn.o = fp8(n("self_attn.o_proj"), h, q_rows);
      w.moe = is_moe_layer(d, l);
      if (!w.moe) {
        w.gate_up = fp8(n("mlp.gate_up_proj"), 2 * inter, h);
        w.down = fp8(n("mlp.down_proj"), h, inter);
      } else {
        SigmoidMoeRank& m = w.experts;
        m.gate = dense_linear(ref(r, n("mlp.gate.weight")), d.experts, h);
        m.correction_bias = require_storage(ref(r, n("mlp.gate.e_score_correction_bias")), DType::F32, {d.experts});
        m.w13 = fp8(n("mlp.experts.w13"), 2 * im, h, "_");
        m.w2 = fp8(n("mlp.experts.w2"), h, im, "_");
        m.has_shared = shared > 0;
        if (m.has_shared) {
          m.shared_gate_up = fp8(n("mlp.shared_experts.gate_up_proj"), 2 * shared, h);
          m.shared_down = fp8(n("mlp.shared_experts.down_proj"), h, shared);
        }
      }
      layers.push_back(w);
    }
    ranks_.push_back(std::move(layers));
  }
}

void Glm4MoeForward::layer(MoeSequence& s, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).input_norm; },
      [&](int r) { gqa_attention_partial(attn_, at(r).attn, s.k[cache_index(r, l)], s.v[cache_index(r, l)], s); });
  add_residual(s);
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).post_norm; },
      [&](int r) { sigmoid_family_mlp_partial(dims_, at(r), s); });
  add_residual(s);
}

}  // namespace

std::unique_ptr<ForwardModel> make_glm4_moe_forward(const ModelProfile& profile,
                                                    const std::vector<RankLayout>& layouts,
                                                    const std::vector<RankStorageView>& storages) {
  return std::make_unique<Glm4MoeForward>(profile, layouts, storages);
}

}  // namespace wsb
