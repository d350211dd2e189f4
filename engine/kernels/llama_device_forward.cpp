#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/llama_device_forward.hpp"

#include "engine/kernels/device_forward_base.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "models/forward/dense_ops.hpp"
#include "models/forward/family_weights.hpp"
#include "models/layout/llama_layout.hpp"

namespace wsb::dk {

namespace {

/// One rank's scratch and KV caches in one slot, on the rank's device.
struct RankScratch {
  DeviceArena arena;
  float* h = nullptr;        ///< normed input [hidden]
  float* qkv = nullptr;      ///< [q_rows + 2 kv_rows]: q heads, then k heads, then v heads
  float* attn = nullptr;     ///< [q_rows]
  float* gate_up = nullptr;  ///< [2 inter_rows]
  float* act = nullptr;      ///< [inter_rows]
  float* scores = nullptr;   ///< [q_heads, max_positions]
  std::vector<float*> k, v;  ///< per layer: [max_positions, kv_rows]
};

struct LlamaSlot final : DeviceForwardBase::SlotBuffers {
  std::vector<RankScratch> ranks;
};

class LlamaDeviceForward final : public DeviceForwardBase {
 public:
  LlamaDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                     const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options);

 protected:
  std::unique_ptr<SlotBuffers> make_slot_buffers(int slot) const override;
  void enqueue_step(TpSlot& tp, SlotBuffers& buffers) const override;

 private:
  void attention(int r, int layer, const TpSlot& tp, const RankScratch& s, const float* x, float* out,
                 cudaStream_t st) const;
  void mlp(int r, int layer, const RankScratch& s, const float* x, float* out, cudaStream_t st) const;

  GqaShape attn_;  ///< RoPE over the full head_dim, no window
  int64_t vocab_rows_, inter_rows_;
  std::vector<LlamaRankHeads> heads_;
  std::vector<LlamaRankWeights> weights_;  ///< device addresses, read at every step, never copied
};

LlamaDeviceForward::LlamaDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                       const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options)
    : DeviceForwardBase(p, layouts, views, options),
      // transformers: scaling = head_dim ** -0.5 (llama_forward.cpp computes it the same way).
      attn_{p.dims.heads, p.dims.kv_heads, p.dims.head_dim, p.dims.head_dim, 0, attention_scale(p.dims.head_dim)},
      vocab_rows_(p.dims.vocab / tp()),
      inter_rows_(p.dims.intermediate / tp()) {
  for (int r = 0; r < tp(); ++r) {
    weights_.push_back(bind_llama_rank(p, rank_storages(), r));
    heads_.push_back(llama_rank_heads(dims_, tp(), r));
  }
  // The host computes inv_freq exactly as the CPU forward does; each device keeps a copy for the rope kernel.
  upload_inv_freq(rope_inv_freq(dims_.rope_theta, dims_.head_dim));
}

std::unique_ptr<DeviceForwardBase::SlotBuffers> LlamaDeviceForward::make_slot_buffers(int slot) const {
  auto out = std::make_unique<LlamaSlot>();
  const int64_t hd = dims_.head_dim, positions = options().max_positions;
  for (int r = 0; r < tp(); ++r) {
    const LlamaRankHeads& heads = heads_[static_cast<size_t>(r)];
    const int64_t q_rows = int64_t{heads.q_heads} * hd, kv_rows = int64_t{heads.kv_heads} * hd;
    ArenaPlan plan;
    const uint64_t h = plan.add_floats(dims_.hidden), qkv = plan.add_floats(q_rows + 2 * kv_rows),
                   attn = plan.add_floats(q_rows), gate_up = plan.add_floats(2 * inter_rows_),
                   act = plan.add_floats(inter_rows_), scores = plan.add_floats(int64_t{heads.q_heads} * positions);
    const KvCachePlan caches = add_kv_caches(plan, kv_rows, kv_rows);
    RankScratch s;
    s.arena = allocate_slot_arena(slot, r, plan, caches, s.k, s.v);
    s.h = s.arena.floats(h);
    s.qkv = s.arena.floats(qkv);
    s.attn = s.arena.floats(attn);
    s.gate_up = s.arena.floats(gate_up);
    s.act = s.arena.floats(act);
    s.scores = s.arena.floats(scores);
    out->ranks.push_back(std::move(s));
  }
  return out;
}

void LlamaDeviceForward::attention(int r, int layer, const TpSlot& tp, const RankScratch& s, const float* x,
                                   float* out, cudaStream_t st) const {
  const LlamaLayerWeights& w = weights_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
  const LlamaRankHeads& heads = heads_[static_cast<size_t>(r)];
  const int hd = dims_.head_dim;
  const int64_t q_rows = int64_t{heads.q_heads} * hd, kv_rows = int64_t{heads.kv_heads} * hd;
  rms_norm(x, w.input_norm, type_, dims_.hidden, eps_, s.h, st);
  matvec(w.qkv, type_, q_rows + 2 * kv_rows, dims_.hidden, s.h, s.qkv, st);
  // q heads and k heads are consecutive head_dim-wide vectors: one launch rotates both.
  rope(s.qkv, heads.q_heads + heads.kv_heads, hd, hd, inv_freq(r), tp.position(r), 1.0f, st);
  float* k_cache = s.k[static_cast<size_t>(layer)];
  float* v_cache = s.v[static_cast<size_t>(layer)];
  store_kv(s.qkv + q_rows, s.qkv + q_rows + kv_rows, kv_rows, tp.position(r), k_cache, v_cache, st);
  decode_attention(gqa_decode_attention(attn_, heads, s.qkv, k_cache, v_cache, tp.position(r), s.scores,
                                        options().max_positions, s.attn),
                   st);
  matvec(w.o, type_, dims_.hidden, q_rows, s.attn, out, st);
}

void LlamaDeviceForward::mlp(int r, int layer, const RankScratch& s, const float* x, float* out,
                             cudaStream_t st) const {
  const LlamaLayerWeights& w = weights_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
  rms_norm(x, w.post_norm, type_, dims_.hidden, eps_, s.h, st);
  matvec(w.gate_up, type_, 2 * inter_rows_, dims_.hidden, s.h, s.gate_up, st);
  silu_mul(s.gate_up, s.gate_up + inter_rows_, inter_rows_, s.act, st);
  matvec(w.down, type_, dims_.hidden, inter_rows_, s.act, out, st);
}

void LlamaDeviceForward::enqueue_step(TpSlot& tp, SlotBuffers& buffers) const {
  const auto& slot = static_cast<const LlamaSlot&>(buffers);
  tp.broadcast_scalars();
  // Vocab-parallel embedding: every rank contributes its row or zeros; the rank-ordered sum is the row.
  tp.rank_partials(false, false, [&](int r, cudaStream_t st, const float*, float* out) {
    embedding_rows(weights_[static_cast<size_t>(r)].ends.embed.data, type_, r * vocab_rows_, vocab_rows_, dims_.hidden,
                   tp.token(r), out, st);
  });
  for (int l = 0; l < dims_.layers; ++l) {
    tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
      attention(r, l, tp, slot.ranks[static_cast<size_t>(r)], x, out, st);
    });
    tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
      mlp(r, l, slot.ranks[static_cast<size_t>(r)], x, out, st);
    });
  }
  tp.gather([&](int r, cudaStream_t st, const float* x, float* out) {
    const VocabEnds& w = weights_[static_cast<size_t>(r)].ends;
    const RankScratch& s = slot.ranks[static_cast<size_t>(r)];
    rms_norm(x, w.norm.data, type_, dims_.hidden, eps_, s.h, st);
    matvec(w.lm_head.data, type_, vocab_rows_, dims_.hidden, s.h, out, st);
  });
}

}  // namespace

std::unique_ptr<ForwardModel> make_llama_device_forward(const ModelProfile& profile,
                                                        const std::vector<RankLayout>& layouts,
                                                        const std::vector<DeviceRankView>& views,
                                                        const DeviceForwardOptions& options) {
  return std::make_unique<LlamaDeviceForward>(profile, layouts, views, options);
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
