#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/llama_device_forward.hpp"

#include <fmt/format.h>

#include <cmath>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_forward_base.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "core/errors.hpp"
#include "models/forward/dense_ops.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/profile/llama_family.hpp"

namespace wsb::dk {

namespace {

WeightType weight_type(const ModelProfile& p) {
  switch (p.dtype) {
    case DType::BF16:
      return WeightType::BF16;
    case DType::F16:
      return WeightType::F16;
    case DType::F32:
      return WeightType::F32;
    default:
      throw Error(ErrorKind::Format, fmt::format("profile '{}': device forward: weight dtype {} is not supported "
                                                 "(BF16, F16, F32)",
                                                 p.id, dtype_name(p.dtype)));
  }
}

/// The layouts the caller's must equal (after the dtype check, so an unsupported dtype reports Format first).
std::vector<RankLayout> expected_layouts(const ModelProfile& p, const std::vector<RankLayout>& layouts) {
  (void)weight_type(p);
  if (layouts.empty())
    throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': device forward: no rank layouts", p.id));
  return build_llama_layouts(p, static_cast<int>(layouts.size()));
}

/// One rank's runtime storages (device addresses, read at every step, never copied).
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

  ModelDims dims_;
  WeightType type_;
  float eps_, scale_;
  int64_t vocab_rows_, inter_rows_;
  std::vector<LlamaRankHeads> heads_;
  std::vector<RankWeights> weights_;
  std::vector<DeviceArena> inv_freq_arena_;  ///< per lane
  std::vector<const float*> inv_freq_;       ///< per rank (its lane's copy)
};

LlamaDeviceForward::LlamaDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                       const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options)
    : DeviceForwardBase(p.id, p.dims.vocab, p.dims.hidden, expected_layouts(p, layouts), layouts, views, options),
      dims_(p.dims),
      type_(weight_type(p)),
      // torch adds the Python float eps to a float32 tensor in float32 (dense_ops.hpp rms_norm).
      eps_(static_cast<float>(p.dims.rms_eps)),
      // transformers: scaling = head_dim ** -0.5 (llama_forward.cpp computes it the same way).
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.dims.head_dim)))),
      vocab_rows_(p.dims.vocab / tp()),
      inter_rows_(p.dims.intermediate / tp()) {
  for (int r = 0; r < tp(); ++r) {
    const RankLayout& layout = layouts[static_cast<size_t>(r)];
    const DeviceRankView& view = views[static_cast<size_t>(r)];
    auto ptr = [&](const std::string& name) { return view.storages[layout.index_of(name)]; };
    RankWeights w;
    w.embed = ptr("model.embed_tokens.weight");
    for (int l = 0; l < dims_.layers; ++l) {
      RankWeights::Layer layer;
      layer.input_norm = ptr(llama_layer_name(l, "input_layernorm.weight"));
      layer.qkv = ptr(llama_layer_name(l, "self_attn.qkv_proj.weight"));
      layer.o = ptr(llama_layer_name(l, "self_attn.o_proj.weight"));
      layer.post_norm = ptr(llama_layer_name(l, "post_attention_layernorm.weight"));
      layer.gate_up = ptr(llama_layer_name(l, "mlp.gate_up_proj.weight"));
      layer.down = ptr(llama_layer_name(l, "mlp.down_proj.weight"));
      w.layers.push_back(layer);
    }
    w.norm = ptr("model.norm.weight");
    w.lm_head = ptr("lm_head.weight");
    weights_.push_back(std::move(w));
    heads_.push_back(llama_rank_heads(dims_, tp(), r));
  }
  // The host computes inv_freq exactly as the CPU forward does; each device keeps a copy for the rope kernel.
  const std::vector<float> inv_freq = rope_inv_freq(dims_.rope_theta, dims_.head_dim);
  const TpTopology& topo = topology();
  for (int l = 0; l < topo.lanes(); ++l) {
    const int device = topo.lane_device[static_cast<size_t>(l)];
    inv_freq_arena_.emplace_back(device, inv_freq.size() * sizeof(float),
                                 fmt::format("profile '{}': device forward: rope frequencies", id()));
    DeviceScope scope(device);
    check(cudaMemcpy(inv_freq_arena_.back().data(), inv_freq.data(), inv_freq.size() * sizeof(float),
                     cudaMemcpyHostToDevice),
          fmt::format("profile '{}': device forward: uploading rope frequencies to device {}", id(), device));
  }
  for (int r = 0; r < tp(); ++r)
    inv_freq_.push_back(inv_freq_arena_[static_cast<size_t>(topo.rank_lane[static_cast<size_t>(r)])].floats(0));
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
    std::vector<uint64_t> k, v;
    for (int l = 0; l < dims_.layers; ++l) {
      k.push_back(plan.add_floats(positions * kv_rows));
      v.push_back(plan.add_floats(positions * kv_rows));
    }
    RankScratch s;
    s.arena = DeviceArena(topology().rank_device[static_cast<size_t>(r)], plan.bytes(),
                          fmt::format("profile '{}': device forward: slot {} rank {} KV caches ({} positions) and "
                                      "scratch",
                                      id(), slot, r, positions));
    s.h = s.arena.floats(h);
    s.qkv = s.arena.floats(qkv);
    s.attn = s.arena.floats(attn);
    s.gate_up = s.arena.floats(gate_up);
    s.act = s.arena.floats(act);
    s.scores = s.arena.floats(scores);
    for (int l = 0; l < dims_.layers; ++l) {
      s.k.push_back(s.arena.floats(k[static_cast<size_t>(l)]));
      s.v.push_back(s.arena.floats(v[static_cast<size_t>(l)]));
    }
    out->ranks.push_back(std::move(s));
  }
  return out;
}

void LlamaDeviceForward::attention(int r, int layer, const TpSlot& tp, const RankScratch& s, const float* x,
                                   float* out, cudaStream_t st) const {
  const RankWeights::Layer& w = weights_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
  const LlamaRankHeads& heads = heads_[static_cast<size_t>(r)];
  const int hd = dims_.head_dim;
  const int64_t q_rows = int64_t{heads.q_heads} * hd, kv_rows = int64_t{heads.kv_heads} * hd;
  rms_norm(x, w.input_norm, type_, dims_.hidden, eps_, s.h, st);
  matvec(w.qkv, type_, q_rows + 2 * kv_rows, dims_.hidden, s.h, s.qkv, st);
  // q heads and k heads are consecutive head_dim-wide vectors: one launch rotates both.
  rope(s.qkv, heads.q_heads + heads.kv_heads, hd, hd, inv_freq_[static_cast<size_t>(r)], tp.position(r), st);
  float* k_cache = s.k[static_cast<size_t>(layer)];
  float* v_cache = s.v[static_cast<size_t>(layer)];
  store_kv(s.qkv + q_rows, s.qkv + q_rows + kv_rows, kv_rows, tp.position(r), k_cache, v_cache, st);
  DecodeAttention a;
  a.q = s.qkv;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.k_stride = kv_rows;
  a.v_stride = kv_rows;
  a.q_heads = heads.q_heads;
  a.qk_dim = hd;
  a.v_dim = hd;
  a.q_head_start = heads.q_head_start;
  a.group = dims_.heads / dims_.kv_heads;
  a.kv_head_start = heads.kv_head_start;
  a.scale = scale_;
  a.position = tp.position(r);
  a.scores = s.scores;
  a.scores_stride = options().max_positions;
  a.out = s.attn;
  decode_attention(a, st);
  matvec(w.o, type_, dims_.hidden, q_rows, s.attn, out, st);
}

void LlamaDeviceForward::mlp(int r, int layer, const RankScratch& s, const float* x, float* out,
                             cudaStream_t st) const {
  const RankWeights::Layer& w = weights_[static_cast<size_t>(r)].layers[static_cast<size_t>(layer)];
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
    embedding_rows(weights_[static_cast<size_t>(r)].embed, type_, r * vocab_rows_, vocab_rows_, dims_.hidden,
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
    const RankWeights& w = weights_[static_cast<size_t>(r)];
    const RankScratch& s = slot.ranks[static_cast<size_t>(r)];
    rms_norm(x, w.norm, type_, dims_.hidden, eps_, s.h, st);
    matvec(w.lm_head, type_, vocab_rows_, dims_.hidden, s.h, out, st);
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
