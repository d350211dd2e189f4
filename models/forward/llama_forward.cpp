#include "models/forward/llama_forward.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"
#include "models/forward/dense_ops.hpp"
#include "models/forward/weight_kernels.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/profile/llama_family.hpp"

namespace wsb {

namespace {

/// Runtime storages of one rank (pointers into the caller's memory, re-read at every step).
struct RankWeights {
  struct Layer {
    const uint8_t* input_norm = nullptr;
    const uint8_t* qkv = nullptr;
    const uint8_t* o = nullptr;
    const uint8_t* post_norm = nullptr;
    const uint8_t* gate_up = nullptr;
    const uint8_t* down = nullptr;
  };
  const uint8_t* embed = nullptr;
  std::vector<Layer> layers;
  const uint8_t* norm = nullptr;
  const uint8_t* lm_head = nullptr;
};

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
  std::vector<RankWeights> ranks_;
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
  if (layouts.empty()) mismatch(id_, "no rank layouts");
  if (storages.size() != layouts.size())
    mismatch(id_, fmt::format("{} rank layouts but {} storage views", layouts.size(), storages.size()));
  const std::vector<RankLayout> expected = build_llama_layouts(p, tp_);
  for (int r = 0; r < tp_; ++r) {
    const RankLayout& got = layouts[static_cast<size_t>(r)];
    const RankLayout& want = expected[static_cast<size_t>(r)];
    const auto& views = storages[static_cast<size_t>(r)].storages;
    if (got.rank != r || got.tp != tp_)
      mismatch(id_, fmt::format("layout {} is for rank {} of tp {}, expected rank {} of tp {}", r, got.rank, got.tp, r,
                                tp_));
    if (got.storages.size() != want.storages.size() || views.size() != want.storages.size())
      mismatch(id_, fmt::format("rank {}: {} layout storages and {} views, the llama layout has {}", r,
                                got.storages.size(), views.size(), want.storages.size()));
    for (size_t i = 0; i < want.storages.size(); ++i) {
      const RuntimeStorageSpec& g = got.storages[i];
      const RuntimeStorageSpec& w = want.storages[i];
      if (g.name != w.name || g.shape != w.shape || g.dtype != w.dtype)
        mismatch(id_, fmt::format("rank {} storage {}: '{}' {} {} differs from the llama layout's '{}' {} {}", r, i,
                                  g.name, dtype_name(g.dtype), shape_string(g.shape), w.name, dtype_name(w.dtype),
                                  shape_string(w.shape)));
      if (views[i].size() != w.bytes())
        mismatch(id_, fmt::format("rank {} storage '{}': view has {} bytes, layout declares {}", r, w.name,
                                  views[i].size(), w.bytes()));
    }
    auto ptr = [&](const std::string& name) { return views[want.index_of(name)].data(); };
    RankWeights rw;
    rw.embed = ptr("model.embed_tokens.weight");
    for (int l = 0; l < dims_.layers; ++l) {
      RankWeights::Layer layer;
      layer.input_norm = ptr(llama_layer_name(l, "input_layernorm.weight"));
      layer.qkv = ptr(llama_layer_name(l, "self_attn.qkv_proj.weight"));
      layer.o = ptr(llama_layer_name(l, "self_attn.o_proj.weight"));
      layer.post_norm = ptr(llama_layer_name(l, "post_attention_layernorm.weight"));
      layer.gate_up = ptr(llama_layer_name(l, "mlp.gate_up_proj.weight"));
      layer.down = ptr(llama_layer_name(l, "mlp.down_proj.weight"));
      rw.layers.push_back(layer);
    }
    rw.norm = ptr("model.norm.weight");
    rw.lm_head = ptr("lm_head.weight");
    ranks_.push_back(std::move(rw));
    heads_.push_back(llama_rank_heads(dims_, tp_, r));
  }
  inv_freq_ = rope_inv_freq(dims_.rope_theta, dims_.head_dim);
  vocab_rows_ = dims_.vocab / tp_;
  inter_rows_ = dims_.intermediate / tp_;
  // transformers: scaling = head_dim ** -0.5, applied to the float32 scores.
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims_.head_dim)));
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
    const RankWeights::Layer& w = ranks_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
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
    const RankWeights::Layer& w = ranks_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
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
  if (token < 0 || token >= dims_.vocab)
    throw Error(ErrorKind::Format,
                fmt::format("profile '{}': token id {} is outside the vocabulary [0, {})", id_, token, dims_.vocab));
  rope_angles(inv_freq_, s->pos, s->cos.data(), s->sin.data());
  // Vocab-parallel embedding: only the rank owning the row contributes it (others contribute zeros).
  const int owner = static_cast<int>(token / vocab_rows_);
  kern_->load_row(ranks_[static_cast<size_t>(owner)].embed, token - owner * vocab_rows_, dims_.hidden, s->x.data());
  for (int l = 0; l < dims_.layers; ++l) {
    attention(*s, l);
    mlp(*s, l);
  }
  logits.resize(static_cast<size_t>(dims_.vocab));
  for (int r = 0; r < tp_; ++r) {
    const RankWeights& w = ranks_[static_cast<size_t>(r)];
    norm(*s, w.norm);
    kern_->matvec(w.lm_head, vocab_rows_, dims_.hidden, s->h.data(), logits.data() + r * vocab_rows_);
  }
  ++s->pos;
}

}  // namespace

std::unique_ptr<ForwardModel> make_llama_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                 const std::vector<RankStorageView>& storages) {
  return std::make_unique<LlamaForward>(profile, layouts, storages);
}

}  // namespace wsb
