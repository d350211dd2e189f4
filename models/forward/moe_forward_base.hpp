#pragma once
// Skeleton shared by the reference forward passes of the MoE families (glm4_moe, deepseek_v3, gpt_oss): input
// checks and storage binding (rank_storages.hpp), per-sequence state, vocab-parallel embedding and lm_head, RMSNorm
// over a rank's copy of a norm weight, and the rank-ordered reduction. TP ranks are emulated in one thread exactly
// like the llama family (llama_forward.hpp): each rank computes its partial sums from its own storages, partials are
// reduced in rank order (sum = ((p0 + p1) + p2) + ...), every sum runs in a fixed order, so logits are bitwise
// reproducible and each sequence is computed alone (batch invariance).
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "models/forward/family_weights.hpp"
#include "models/forward/forward.hpp"
#include "models/forward/quant_linear.hpp"
#include "models/forward/rank_storages.hpp"
#include "models/forward/rope_yarn.hpp"
#include "models/forward/weight_kernels.hpp"

namespace wsb {

/// KV caches of every (rank, layer) and per-step scratch, so a step allocates nothing once the caches reserved
/// enough rows.
class MoeSequence final : public SequenceState {
 public:
  int64_t position() const override { return pos; }

  const void* owner = nullptr;
  int64_t pos = 0;
  std::vector<std::vector<float>> k, v;  ///< [rank * layers + layer], position-major rows (family-defined width)
  std::vector<float> x, h, sum, partial, routed, expert_out;  ///< hidden wide
  std::vector<float> norm_w;                                  ///< widest RMSNorm weight
  std::vector<float> a, b, c, d, scratch;                     ///< MoeForwardBase::buffer_floats() each
  std::vector<float> router, router_bias, router_scratch, weights;  ///< experts wide (scratch: 2 * experts)
  std::vector<int> experts;                                   ///< top_k wide
  std::vector<float> scores, cos, sin;
};

/// s.partial = one rank's MLP of a sigmoid-router family layer (glm4_moe, deepseek_v3) for the normalized s.h:
/// routed + shared experts on MoE layers (`w.moe`), the dense SwiGLU `w.gate_up` / `w.down` before them
/// (moe_blocks.cpp).
void sigmoid_family_mlp_partial(const ModelDims& dims, const SigmoidFamilyMlp& w, MoeSequence& s);

class MoeForwardBase : public ForwardModel {
 public:
  std::unique_ptr<SequenceState> new_sequence() const override;
  /// Embedding (only the rank owning the token's row contributes it), layer(s, l) for every layer, final norm and
  /// lm_head per rank into its vocab slice, then the position advances. Throws as forward.hpp states.
  void step(SequenceState& seq, int32_t token, std::vector<float>& logits) const override;
  int vocab() const override { return dims_.vocab; }

 protected:
  /// Checks and binds `layouts` and `storages` (bind_host_storages: Error(Mismatch) naming the profile, rank and
  /// storage; whatever build_rank_layouts throws for an unsupported tp), then every rank's vocab ends
  /// (bind_vocab_ends). Throws Error(Format) first for an unsupported profile.dtype (weight_kernels).
  MoeForwardBase(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                 const std::vector<RankStorageView>& storages);

  /// One decoder layer: attention and MLP, each adding its reduced output to s.x.
  virtual void layer(MoeSequence& s, int layer) const = 0;

  /// Every rank's runtime storages (host bytes), for the family's weight binding (family_weights.hpp).
  const RankStorages& rank_storages() const { return storages_; }
  /// out[0..n) = RMSNorm(x) with the n-wide norm weight `w` (widened to float32 into s.norm_w), eps dims.rms_eps.
  void rms(MoeSequence& s, const float* x, const StorageRef& w, int64_t n, float* out) const;
  /// s.sum (+)= s.partial: rank 0 assigns, later ranks add.
  void reduce(MoeSequence& s, int rank) const;
  /// For every rank in order: out = RMSNorm(s.x) with norm_of(rank) into s.h, partial_of(rank) writes that rank's
  /// s.partial, then reduce(s, rank). The shape of both halves of every decoder layer; the caller adds biases and
  /// the residual afterwards.
  template <typename NormOf, typename PartialOf>
  void rank_partials(MoeSequence& s, NormOf norm_of, PartialOf partial_of) const {
    for (int r = 0; r < tp_; ++r) {
      rms(s, s.x.data(), norm_of(r), dims_.hidden, s.h.data());
      partial_of(r);
      reduce(s, r);
    }
  }
  /// One glm4_moe / deepseek_v3 decoder layer: the attention half (norm input_norm_of(r), attention(r) writes that
  /// rank's s.partial) and the sigmoid-family MLP half (mlp_of(r): its post_attention_layernorm, then
  /// sigmoid_family_mlp_partial), each reduced in rank order and added to s.x.
  template <typename InputNormOf, typename Attention, typename MlpOf>
  void sigmoid_family_layer(MoeSequence& s, InputNormOf input_norm_of, Attention attention, MlpOf mlp_of) const {
    rank_partials(s, input_norm_of, attention);
    add_residual(s);
    rank_partials(
        s, [&](int r) -> const StorageRef& { return mlp_of(r).post_norm; },
        [&](int r) { sigmoid_family_mlp_partial(dims_, mlp_of(r), s); });
    add_residual(s);
  }
  /// Index of the KV cache of (rank, layer) in MoeSequence::k / v.
  size_t cache_index(int rank, int layer) const {
    return static_cast<size_t>(rank) * static_cast<size_t>(dims_.layers) + static_cast<size_t>(layer);
  }
  /// s.x += s.sum (the residual connection after attention or MLP).
  void add_residual(MoeSequence& s) const;
  /// Rotary frequencies used by step() to fill s.cos / s.sin (inv_freq.size() entries each, multiplied by the
  /// attention scaling as transformers' rotary embeddings do).
  void set_rope(RopeFrequencies rope) {
    inv_freq_ = std::move(rope.inv_freq);
    rope_scale_ = rope.attention_scaling;
  }
  /// Grows the a/b/c/d/scratch buffers of new sequences to at least n floats.
  void need_buffer(int64_t n) { buffer_floats_ = std::max(buffer_floats_, n); }
  /// need_buffer(max(rows, cols)) for each of `linears` (an unbound one has 0 rows and cols).
  void need_linears(std::initializer_list<const QuantLinear*> linears) {
    for (const QuantLinear* l : linears) need_buffer(std::max(l->rows, l->cols));
  }
  /// Grows s.norm_w to at least n floats.
  void need_norm(int64_t n) { norm_floats_ = std::max(norm_floats_, n); }

  std::string id_;
  ModelDims dims_;
  int tp_;
  const WeightKernels* kern_;  ///< kernels of the unquantized weight dtype (profile.dtype)

 private:
  RankStorages storages_;
  std::vector<VocabEnds> ends_;
  std::vector<float> inv_freq_;
  float rope_scale_ = 1.0f;
  int64_t vocab_rows_ = 0;
  int64_t buffer_floats_ = 0;
  int64_t norm_floats_ = 0;
};

}  // namespace wsb
