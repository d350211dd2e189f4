#include "models/forward/moe_forward_base.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "models/forward/dense_ops.hpp"

namespace wsb {

namespace {

[[noreturn]] void mismatch(const std::string& id, const std::string& what) {
  throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': reference forward: {}", id, what));
}

}  // namespace

MoeForwardBase::MoeForwardBase(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                               const std::vector<RankStorageView>& storages)
    : id_(p.id),
      dims_(p.dims),
      tp_(static_cast<int>(layouts.size())),
      kern_(&weight_kernels(p.dtype)),
      storages_(bind_host_storages(p, layouts, storages)) {
  vocab_rows_ = dims_.vocab / tp_;
  for (int r = 0; r < tp_; ++r) ends_.push_back(bind_vocab_ends(p, storages_, r));
  need_norm(dims_.hidden);
}

std::unique_ptr<SequenceState> MoeForwardBase::new_sequence() const {
  auto s = std::make_unique<MoeSequence>();
  s->owner = this;
  const size_t caches = static_cast<size_t>(tp_) * static_cast<size_t>(dims_.layers);
  s->k.resize(caches);
  s->v.resize(caches);
  const size_t hidden = static_cast<size_t>(dims_.hidden), buffer = static_cast<size_t>(buffer_floats_);
  for (auto* v : {&s->x, &s->h, &s->sum, &s->partial, &s->routed, &s->expert_out}) v->resize(hidden);
  s->norm_w.resize(static_cast<size_t>(norm_floats_));
  for (auto* v : {&s->a, &s->b, &s->c, &s->d, &s->scratch}) v->resize(buffer);
  const size_t experts = static_cast<size_t>(std::max(dims_.experts, 1));
  s->router.resize(experts);
  s->router_bias.resize(experts);
  s->router_scratch.resize(2 * experts);
  s->weights.resize(experts);
  s->experts.resize(experts);
  s->cos.resize(inv_freq_.size());
  s->sin.resize(inv_freq_.size());
  return s;
}

void MoeForwardBase::rms(MoeSequence& s, const float* x, const StorageRef& w, int64_t n, float* out) const {
  kern_->load_row(w.data, 0, n, s.norm_w.data());
  rms_norm(x, s.norm_w.data(), n, dims_.rms_eps, out);
}

void MoeForwardBase::reduce(MoeSequence& s, int rank) const {
  if (rank == 0) {
    s.sum = s.partial;
  } else {
    for (size_t i = 0; i < s.sum.size(); ++i) s.sum[i] += s.partial[i];
  }
}

void MoeForwardBase::add_residual(MoeSequence& s) const {
  for (size_t i = 0; i < s.x.size(); ++i) s.x[i] += s.sum[i];
}

void MoeForwardBase::step(SequenceState& state, int32_t token, std::vector<float>& logits) const {
  auto* s = dynamic_cast<MoeSequence*>(&state);
  if (s == nullptr || s->owner != this) mismatch(id_, "sequence state was created by another forward model");
  check_token(id_, token, dims_.vocab);
  rope_angles(inv_freq_, s->pos, s->cos.data(), s->sin.data(), rope_scale_);
  if (s->scores.size() < static_cast<size_t>(s->pos + 1)) s->scores.resize(static_cast<size_t>(s->pos + 1) * 2);
  const int owner = static_cast<int>(token / vocab_rows_);
  kern_->load_row(ends_[static_cast<size_t>(owner)].embed.data, token - owner * vocab_rows_, dims_.hidden,
                  s->x.data());
  for (int l = 0; l < dims_.layers; ++l) layer(*s, l);
  logits.resize(static_cast<size_t>(dims_.vocab));
  for (int r = 0; r < tp_; ++r) {
    const VocabEnds& e = ends_[static_cast<size_t>(r)];
    rms(*s, s->x.data(), e.norm, dims_.hidden, s->h.data());
    kern_->matvec(e.lm_head.data, vocab_rows_, dims_.hidden, s->h.data(), logits.data() + r * vocab_rows_);
  }
  ++s->pos;
}

}  // namespace wsb
