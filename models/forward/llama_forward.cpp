#include "models/forward/llama_forward.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/forward/dense_ops.hpp"
#include "models/forward/family_weights.hpp"
#include "models/forward/weight_kernels.hpp"
#include "models/layout/llama_layout.hpp"

namespace wsb {

namespace {

/// KV caches of every (rank, layer) plus per-step scratch, so a step allocates nothing once warmed up.
class LlamaSequence final : public SequenceState {
 public:
  int64_t position() const override { return pos; }

  const void* owner = nullptr;
  int64_t pos = 0;
  std::vector<std::vector<float>> k, v;  // [rank * layers + layer], position-major rows of kv_heads*head_dim
  std::vector<float> x, h, sum, partial, norm_w, qkv, attn, gate_up, act, scores, cos, sin;
};

class LlamaForward final : public ForwardModel {
 public:
  LlamaForward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
               const std::vector<RankStorageView>& storages);

  std::unique_ptr<SequenceState> new_sequence() const override;
  void step(SequenceState& seq, int32_t token, std::vector<float>& logits) const override;
  int vocab() const override { return dims_.vocab; }

 private:
  void attention(LlamaSequence& s, int layer) const;
  void mlp(LlamaSequence& s, int layer) const;
  /// s.h = RMSNorm(s.x) with the norm weight stored at `w` (one rank's copy).
  void norm(LlamaSequence& s, const uint8_t* w) const;
  /// s.sum (+)= s.partial: rank 0 assigns, later ranks add, so sum = ((p0 + p1) + p2) + ...
  void reduce(LlamaSequence& s, int rank) const;

  std::string id_;
  ModelDims dims_;
  int tp_;
  const WeightKernels* kern_;
  std::vector<LlamaRankHeads> heads_;
  std::vector<LlamaRankWeights> ranks_;  ///< pointers into the caller's memory, re-read at every step
  std::vector<float> inv_freq_;
  int64_t vocab_rows_, inter_rows_;
  float scale_;
};

[[noreturn]] void mismatch(const std::string& id, const std::string& what) {
  throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': reference forward: {}", id, what));
}

LlamaForward::LlamaForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                           const std::vector<RankStorageView>& storages)
    : id_(p.id), dims_(p.dims), tp_(static_cast<int>(layouts.size())), kern_(&weight_kernels(p.dtype)) {
  const RankStorages bound = bind_host_storages(p, layouts, storages);
  for (int r = 0; r < tp_; ++r) {
    ranks_.push_back(bind_llama_rank(p, bound, r));
    heads_.push_back(llama_rank_heads(dims_, tp_, r));
  }
  inv_freq_ = rope_inv_freq(dims_.rope_theta, dims_.head_dim);
  vocab_rows_ = dims_.vocab / tp_;
  inter_rows_ = dims_.intermediate / tp_;
  // transformers: scaling = head_dim ** -0.5, applied to the float32 scores.
  scale_ = attention_scale(dims_.head_dim);
}

std::unique_ptr<SequenceState> LlamaForward::new_sequence() const {
  auto s = std::make_unique<LlamaSequence>();
  s->owner = this;
  const size_t caches = static_cast<size_t>(tp_) * static_cast<size_t>(dims_.layers);
  s->k.resize(caches);
  s->v.resize(caches);
  const size_t hidden = static_cast<size_t>(dims_.hidden), hd = static_cast<size_t>(dims_.head_dim);
  const size_t q_rows = static_cast<size_t>(heads_[0].q_heads) * hd;
  const size_t kv_rows = static_cast<size_t>(heads_[0].kv_heads) * hd;
  for (size_t i = 0; i < caches; ++i) {
    s->k[i].reserve(64 * kv_rows);
    s->v[i].reserve(64 * kv_rows);
  }
  s->x.resize(hidden);
  s->h.resize(hidden);
  s->sum.resize(hidden);
  s->partial.resize(hidden);
  s->norm_w.resize(hidden);
  s->qkv.resize(q_rows + 2 * kv_rows);
  s->attn.resize(q_rows);
  s->gate_up.resize(2 * static_cast<size_t>(inter_rows_));
  s->act.resize(static_cast<size_t>(inter_rows_));
  s->cos.resize(hd / 2);
  s->sin.resize(hd / 2);
  return s;
}

void LlamaForward::norm(LlamaSequence& s, const uint8_t* w) const {
  kern_->load_row(w, 0, dims_.hidden, s.norm_w.data());
  rms_norm(s.x.data(), s.norm_w.data(), dims_.hidden, dims_.rms_eps, s.h.data());
}

void LlamaForward::reduce(LlamaSequence& s, int rank) const {
  if (rank == 0) {
    s.sum = s.partial;
  } else {
    for (int i = 0; i < dims_.hidden; ++i) s.sum[static_cast<size_t>(i)] += s.partial[static_cast<size_t>(i)];
  }
}

void LlamaForward::attention(LlamaSequence& s, int layer) const {
  const int hd = dims_.head_dim, group = dims_.heads / dims_.kv_heads;
  const int64_t length = s.pos + 1;
  if (s.scores.size() < static_cast<size_t>(length)) s.scores.resize(static_cast<size_t>(length) * 2);
  for (int r = 0; r < tp_; ++r) {
    const LlamaLayerWeights& w = ranks_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
    const LlamaRankHeads& heads = heads_[static_cast<size_t>(r)];
    const int64_t q_rows = int64_t{heads.q_heads} * hd, kv_rows = int64_t{heads.kv_heads} * hd;
    norm(s, w.input_norm);
    kern_->matvec(w.qkv, q_rows + 2 * kv_rows, dims_.hidden, s.h.data(), s.qkv.data());
    float* q = s.qkv.data();
    float* k = q + q_rows;
    const float* v = k + kv_rows;
    apply_rope(q, heads.q_heads, hd, s.cos.data(), s.sin.data());
    apply_rope(k, heads.kv_heads, hd, s.cos.data(), s.sin.data());
    const size_t cache = static_cast<size_t>(r) * static_cast<size_t>(dims_.layers) + static_cast<size_t>(layer);
    std::vector<float>& kc = s.k[cache];
    std::vector<float>& vc = s.v[cache];
    kc.insert(kc.end(), k, k + kv_rows);
    vc.insert(vc.end(), v, v + kv_rows);
    for (int i = 0; i < heads.q_heads; ++i) {
      // GQA: global q head g reads global kv head g / (heads / kv_heads).
      const int kv_local = (heads.q_head_start + i) / group - heads.kv_head_start;
      attend_head(q + int64_t{i} * hd, kc.data() + int64_t{kv_local} * hd, vc.data() + int64_t{kv_local} * hd, length,
                  kv_rows, hd, scale_, s.scores.data(), s.attn.data() + int64_t{i} * hd);
    }
    kern_->matvec(w.o, dims_.hidden, q_rows, s.attn.data(), s.partial.data());
    reduce(s, r);
  }
  for (int i = 0; i < dims_.hidden; ++i) s.x[static_cast<size_t>(i)] += s.sum[static_cast<size_t>(i)];
}

void LlamaForward::mlp(LlamaSequence& s, int layer) const {
  for (int r = 0; r < tp_; ++r) {
    const LlamaLayerWeights& w = ranks_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
    norm(s, w.post_norm);
    kern_->matvec(w.gate_up, 2 * inter_rows_, dims_.hidden, s.h.data(), s.gate_up.data());
    swiglu(s.gate_up.data(), s.gate_up.data() + inter_rows_, inter_rows_, s.act.data());
    kern_->matvec(w.down, dims_.hidden, inter_rows_, s.act.data(), s.partial.data());
    reduce(s, r);
  }
  for (int i = 0; i < dims_.hidden; ++i) s.x[static_cast<size_t>(i)] += s.sum[static_cast<size_t>(i)];
}

void LlamaForward::step(SequenceState& state, int32_t token, std::vector<float>& logits) const {
  auto* s = dynamic_cast<LlamaSequence*>(&state);
  if (s == nullptr || s->owner != this) mismatch(id_, "sequence state was created by another forward model");
  check_token(id_, token, dims_.vocab);
  rope_angles(inv_freq_, s->pos, s->cos.data(), s->sin.data());
  // Vocab-parallel embedding: only the rank owning the row contributes it (others contribute zeros).
  const int owner = static_cast<int>(token / vocab_rows_);
  kern_->load_row(ranks_[static_cast<size_t>(owner)].ends.embed.data, token - owner * vocab_rows_, dims_.hidden,
                  s->x.data());
  for (int l = 0; l < dims_.layers; ++l) {
    attention(*s, l);
    mlp(*s, l);
  }
  logits.resize(static_cast<size_t>(dims_.vocab));
  for (int r = 0; r < tp_; ++r) {
    const VocabEnds& w = ranks_[static_cast<size_t>(r)].ends;
    norm(*s, w.norm.data);
    kern_->matvec(w.lm_head.data, vocab_rows_, dims_.hidden, s->h.data(), logits.data() + r * vocab_rows_);
  }
  ++s->pos;
}

}  // namespace

std::unique_ptr<ForwardModel> make_llama_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                 const std::vector<RankStorageView>& storages) {
  return std::make_unique<LlamaForward>(profile, layouts, storages);
}

}  // namespace wsb
