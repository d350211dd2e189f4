// gpt_oss reference forward: GQA with sinks and alternating sliding windows, MXFP4 or BF16 experts with biases
// (contract: moe_forward.hpp; storages: models/layout/moe_layout.hpp).
#include <algorithm>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_blocks.hpp"
#include "models/forward/moe_forward.hpp"
#include "models/forward/moe_ops.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

class GptOssForward final : public MoeForwardBase {
 public:
  GptOssForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                const std::vector<RankStorageView>& storages);

 private:
  using Layer = GptOssLayerWeights;

  void layer(MoeSequence& s, int layer) const override;
  /// One rank's MoE: s.partial = sum over the chosen experts (ascending id) of weight * (w2 @ act), without the
  /// down_proj bias; for rank 0 also s.d = sum of weight * down_proj bias (added after the reduction).
  void experts(MoeSequence& s, const Layer& w, int rank) const;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  std::vector<RankSlice> inter_;           // [rank] expert intermediate slice
  GqaParams attn_;
};

GptOssForward::GptOssForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                             const std::vector<RankStorageView>& storages)
    : MoeForwardBase(p, layouts, storages) {
  const ModelDims& d = dims_;
  const int64_t hd = d.head_dim;
  attn_ = GqaParams{gpt_oss_attention(d), kern_};
  // transformers GptOssRotaryEmbedding: inv_freq over head_dim, YaRN when rope_scaling says so (cos and sin scaled
  // by its attention factor); _apply_rotary_emb rotates the two halves of each head, as apply_rope does.
  set_rope(rope_frequencies(d.rope_theta, attn_.rotary_dim, d.rope_scaling));
  need_buffer(d.hidden);
  for (int r = 0; r < tp_; ++r) {
    const LlamaRankHeads heads = llama_rank_heads(d, tp_, r);
    const int64_t qkv_rows = (heads.q_heads + 2 * int64_t{heads.kv_heads}) * hd;
    const RankSlice im = gpt_oss_expert_slice(p, tp_, r);
    inter_.push_back(im);
    need_buffer(std::max({qkv_rows, 2 * im.padded, int64_t{d.experts}}));
    ranks_.push_back(bind_gpt_oss_rank(p, rank_storages(), r));
  }
}

void GptOssForward::experts(MoeSequence& s, const Layer& w, int rank) const {
  const ModelDims& d = dims_;
  const RankSlice& im = inter_[static_cast<size_t>(rank)];
  linear_matvec(w.router, 0, s.h.data(), s.router.data(), s.scratch.data());
  kern_->load_row(w.router_bias.data, 0, d.experts, s.router_bias.data());
  for (int i = 0; i < d.experts; ++i) s.router[static_cast<size_t>(i)] += s.router_bias[static_cast<size_t>(i)];
  softmax_topk_route(s.router.data(), d.experts, d.top_k, s.experts.data(), s.weights.data());
  sort_selected_by_expert(s, d.top_k);
  std::fill(s.routed.begin(), s.routed.end(), 0.0f);
  if (rank == 0) std::fill(s.d.begin(), s.d.begin() + d.hidden, 0.0f);
  for (int j = 0; j < d.top_k; ++j) {
    const int e = s.experts[static_cast<size_t>(j)];
    const float weight = s.weights[static_cast<size_t>(j)];
    float* gate_up = s.a.data();  // interleaved rows: 2j gate, 2j + 1 up
    linear_matvec(w.w13, e, s.h.data(), gate_up, s.scratch.data());
    kern_->load_row(w.w13_bias.data, e, 2 * im.padded, s.c.data());
    for (int64_t i = 0; i < 2 * im.length; ++i) gate_up[i] += s.c[static_cast<size_t>(i)];
    clamped_swiglu_interleaved(gate_up, im.length, static_cast<float>(d.swiglu_limit), s.b.data());
    linear_matvec(w.w2, e, s.b.data(), s.expert_out.data(), s.scratch.data());
    for (size_t i = 0; i < s.routed.size(); ++i) s.routed[i] += s.expert_out[i] * weight;
    if (rank == 0) {
      kern_->load_row(w.w2_bias.data, e, d.hidden, s.c.data());
      for (int i = 0; i < d.hidden; ++i) s.d[static_cast<size_t>(i)] += s.c[static_cast<size_t>(i)] * weight;
    }
  }
  s.partial = s.routed;
}

void GptOssForward::layer(MoeSequence& s, int l) const {
  GqaParams params = attn_;
  params.window = gpt_oss_is_sliding(l) ? dims_.sliding_window : 0;
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).input_norm; },
      [&](int r) { gqa_attention_partial(params, at(r).attn, s.k[cache_index(r, l)], s.v[cache_index(r, l)], s); });
  // Row-parallel bias: once, after the reduction (rank 0's copy).
  const Layer& first = ranks_[0][static_cast<size_t>(l)];
  kern_->load_row(first.o_bias.data, 0, dims_.hidden, s.c.data());
  for (int i = 0; i < dims_.hidden; ++i) s.sum[static_cast<size_t>(i)] += s.c[static_cast<size_t>(i)];
  add_residual(s);
  rank_partials(
      s, [&](int r) -> const StorageRef& { return at(r).post_norm; }, [&](int r) { experts(s, at(r), r); });
  for (int i = 0; i < dims_.hidden; ++i) s.sum[static_cast<size_t>(i)] += s.d[static_cast<size_t>(i)];
  add_residual(s);
}

}  // namespace

std::unique_ptr<ForwardModel> make_gpt_oss_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                   const std::vector<RankStorageView>& storages) {
  return std::make_unique<GptOssForward>(profile, layouts, storages);
}

}  // namespace wsb
