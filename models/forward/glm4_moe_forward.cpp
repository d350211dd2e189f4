// glm4_moe reference forward (contract: moe_forward.hpp; storages: models/layout/moe_layout.hpp).
#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_blocks.hpp"
#include "models/forward/moe_forward.hpp"

namespace wsb {

namespace {

class Glm4MoeForward final : public MoeForwardBase {
 public:
  Glm4MoeForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                 const std::vector<RankStorageView>& storages);

 private:
  using Layer = Glm4MoeLayerWeights;

  void layer(MoeSequence& s, int layer) const override;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  GqaParams attn_;
};

Glm4MoeForward::Glm4MoeForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                               const std::vector<RankStorageView>& storages)
    : MoeForwardBase(p, layouts, storages) {
  attn_ = GqaParams{glm4_moe_attention(dims_), kern_};
  set_rope(rope_frequencies(dims_.rope_theta, attn_.rotary_dim, dims_.rope_scaling));
  for (int r = 0; r < tp_; ++r) {
    ranks_.push_back(bind_glm4_moe_rank(p, rank_storages(), r));
    for (const Layer& w : ranks_.back()) {
      const SigmoidMoeRank& e = w.mlp.experts;
      need_linears({&w.attn.qkv, &w.attn.o, &w.mlp.gate_up, &w.mlp.down, &e.w13, &e.w2, &e.shared_gate_up,
                    &e.shared_down});
    }
  }
}

void Glm4MoeForward::layer(MoeSequence& s, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  sigmoid_family_layer(
      s, [&](int r) -> const StorageRef& { return at(r).input_norm; },
      [&](int r) { gqa_attention_partial(attn_, at(r).attn, s.k[cache_index(r, l)], s.v[cache_index(r, l)], s); },
      [&](int r) -> const SigmoidFamilyMlp& { return at(r).mlp; });
}

}  // namespace

std::unique_ptr<ForwardModel> make_glm4_moe_forward(const ModelProfile& profile,
                                                    const std::vector<RankLayout>& layouts,
                                                    const std::vector<RankStorageView>& storages) {
  return std::make_unique<Glm4MoeForward>(profile, layouts, storages);
}

}  // namespace wsb
