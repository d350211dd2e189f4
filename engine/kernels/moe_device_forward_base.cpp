#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/moe_device_forward_base.hpp"

#include <algorithm>

#include "engine/kernels/moe_kernels.hpp"
#include "models/forward/rope_yarn.hpp"
#include "models/forward/family_weights.hpp"

namespace wsb::dk {

MoeDeviceForwardBase::MoeDeviceForwardBase(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                           const std::vector<DeviceRankView>& views,
                                           const DeviceForwardOptions& options, int rotary_dim)
    : DeviceForwardBase(p, layouts, views, options) {
  for (int r = 0; r < tp(); ++r) {
    const VocabEnds e = bind_vocab_ends(p, rank_storages(), r);
    embed_.push_back(e.embed.data);
    norm_.push_back(e.norm.data);
    lm_head_.push_back(e.lm_head.data);
  }
  const RopeFrequencies rope = rope_frequencies(dims_.rope_theta, rotary_dim, dims_.rope_scaling);
  upload_inv_freq(rope.inv_freq, rope.attention_scaling);
}

std::unique_ptr<DeviceForwardBase::SlotBuffers> MoeDeviceForwardBase::make_slot_buffers(int slot) const {
  auto out = std::make_unique<MoeSlot>();
  const int64_t hidden = dims_.hidden, positions = options().max_positions;
  const int64_t experts = std::max(dims_.experts, 1), top_k = std::max(dims_.top_k, 1);
  for (int r = 0; r < tp(); ++r) {
    ArenaPlan plan;
    const uint64_t h = plan.add_floats(hidden), a = plan.add_floats(sizes_.scratch), b = plan.add_floats(sizes_.scratch),
                   c = plan.add_floats(sizes_.scratch), d = plan.add_floats(sizes_.scratch),
                   logits = plan.add_floats(experts), ids = plan.add(static_cast<uint64_t>(top_k) * sizeof(int32_t)),
                   weights = plan.add_floats(top_k), gate_up = plan.add_floats(sizes_.gate_up),
                   act = plan.add_floats(sizes_.act), expert_out = plan.add_floats(top_k * hidden),
                   shared_out = plan.add_floats(hidden), bias_sum = plan.add_floats(hidden),
                   residual = plan.add_floats(hidden), scores = plan.add_floats(sizes_.q_heads * positions);
    const KvCachePlan caches = add_kv_caches(plan, sizes_.k_width, sizes_.v_width);
    MoeRankBuffers s;
    s.arena = allocate_slot_arena(slot, r, plan, caches, s.k, s.v);
    s.h = s.arena.floats(h);
    s.a = s.arena.floats(a);
    s.b = s.arena.floats(b);
    s.c = s.arena.floats(c);
    s.d = s.arena.floats(d);
    s.logits = s.arena.floats(logits);
    s.ids = reinterpret_cast<int32_t*>(s.arena.data() + ids);
    s.weights = s.arena.floats(weights);
    s.gate_up = s.arena.floats(gate_up);
    s.act = s.arena.floats(act);
    s.expert_out = s.arena.floats(expert_out);
    s.shared_out = s.arena.floats(shared_out);
    s.bias_sum = s.arena.floats(bias_sum);
    s.residual = s.arena.floats(residual);
    s.scores = s.arena.floats(scores);
    out->ranks.push_back(std::move(s));
  }
  return out;
}

void MoeDeviceForwardBase::enqueue_step(TpSlot& tp, SlotBuffers& buffers) const {
  auto& slot = static_cast<MoeSlot&>(buffers);
  const int64_t vocab_rows = dims_.vocab / this->tp();
  tp.broadcast_scalars();
  // Vocab-parallel embedding: every rank contributes its row or zeros; the rank-ordered sum is the row.
  tp.rank_partials(false, false, [&](int r, cudaStream_t st, const float*, float* out) {
    embedding_rows(embed_[static_cast<size_t>(r)], type_, r * vocab_rows, vocab_rows, dims_.hidden, tp.token(r), out,
                   st);
  });
  for (int l = 0; l < dims_.layers; ++l) enqueue_layer(tp, slot, l);
  tp.gather([&](int r, cudaStream_t st, const float* x, float* out) {
    const MoeRankBuffers& s = slot.ranks[static_cast<size_t>(r)];
    rms_norm(x, norm_[static_cast<size_t>(r)], type_, dims_.hidden, eps_, s.h, st);
    matvec(lm_head_[static_cast<size_t>(r)], type_, vocab_rows, dims_.hidden, s.h, out, st);
  });
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
