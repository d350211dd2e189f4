// deepseek_v3 device forward: models/forward/deepseek_v3_forward.cpp on CUDA devices (MLA with naive latent
// expansion, interleaved RoPE, BF16 dense layers and shared expert, NVFP4 routed experts with w13 = [up; gate]).
#ifdef WSBENCH_HAVE_CUDA
#include <algorithm>

#include "engine/kernels/moe_device_blocks.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "engine/kernels/moe_kernels.hpp"
#include "engine/quant/device_linear_bind.hpp"
#include "models/forward/family_weights.hpp"

namespace wsb::dk {

namespace {

class DeepseekV3DeviceForward final : public MoeDeviceForwardBase {
 public:
  DeepseekV3DeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                          const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options);

 private:
  struct Layer {
    const uint8_t* input_norm = nullptr;
    const uint8_t* q_a_norm = nullptr;
    const uint8_t* kv_a_norm = nullptr;
    DeviceLinear qkv_a, q_b, kv_b, o;
    DeviceSigmoidFamilyMlp mlp;
  };

  void enqueue_layer(TpSlot& tp, MoeSlot& slot, int layer) const override;
  /// One rank's MLA into `out`: appends the expanded key and value of this position to the layer's caches.
  void attention(const Layer& w, const MoeRankBuffers& s, int layer, const int32_t* position, const float* inv_freq,
                 float* out, cudaStream_t st) const;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  MlaShape mla_;
};

DeepseekV3DeviceForward::DeepseekV3DeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                                 const std::vector<DeviceRankView>& views,
                                                 const DeviceForwardOptions& options)
    // DeepseekV3RotaryEmbedding runs over qk_rope_head_dim (deepseek_v3_forward.cpp).
    : MoeDeviceForwardBase(p, layouts, views, options, p.dims.qk_rope_head_dim) {
  const ModelDims& d = dims_;
  const int tp = this->tp();
  mla_ = deepseek_v3_attention(d, tp);
  const MlaShape& m = mla_;
  const SigmoidFamilyWidths widths = sigmoid_family_widths(d, tp);
  MoeBufferSizes& z = sizes();
  z.scratch = std::max({z.scratch, m.a_rows, m.q_rows, m.kv_rows, int64_t{d.q_lora_rank}, int64_t{d.kv_lora_rank},
                        m.o_cols});
  z.q_heads = std::max<int64_t>(z.q_heads, m.heads);
  z.k_width = std::max(z.k_width, m.q_rows);
  z.v_width = std::max(z.v_width, m.o_cols);
  need_mlp(z, widths.inter);
  need_mlp(z, widths.shared);
  need_routed_experts(z, d.top_k, widths.im);
  for (int r = 0; r < tp; ++r) {
    std::vector<Layer> layers;
    for (const DeepseekV3LayerWeights& w : bind_deepseek_v3_rank(p, rank_storages(), r)) {
      layers.push_back(Layer{w.input_norm.data, w.q_a_norm.data, w.kv_a_norm.data, to_device_linear(w.qkv_a),
                             to_device_linear(w.q_b), to_device_linear(w.kv_b), to_device_linear(w.o),
                             to_device(w.mlp)});
    }
    ranks_.push_back(std::move(layers));
  }
}

void DeepseekV3DeviceForward::attention(const Layer& w, const MoeRankBuffers& s, int layer, const int32_t* position,
                                        const float* inv_freq, float* out, cudaStream_t st) const {
  const ModelDims& d = dims_;
  const int heads = mla_.heads, nope = mla_.nope, rope = mla_.rope, qk = mla_.qk, v = mla_.v;
  float* a = s.a;  // [q_lora | latent | k_rope]
  launch_linear_matvec(w.qkv_a, nullptr, 1, s.h, 0, a, st);
  float* q = s.b;  // heads x [nope | rope]
  rms_norm(a, w.q_a_norm, type_, d.q_lora_rank, eps_, s.c, st);
  launch_linear_matvec(w.q_b, nullptr, 1, s.c, 0, q, st);
  float* kv = s.d;  // heads x [k_nope | v]
  rms_norm(a + d.q_lora_rank, w.kv_a_norm, type_, d.kv_lora_rank, eps_, s.c, st);
  launch_linear_matvec(w.kv_b, nullptr, 1, s.c, 0, kv, st);
  float* k_rope = a + d.q_lora_rank + d.kv_lora_rank;
  rope_interleaved(k_rope, 1, rope, rope, inv_freq, position, rope_scale(), st);
  rope_interleaved(q + nope, heads, qk, rope, inv_freq, position, rope_scale(), st);
  // Naive expansion: each head's key is [k_nope | shared k_rope], its value v; both cached per head.
  float* k_cache = s.k[static_cast<size_t>(layer)];
  float* v_cache = s.v[static_cast<size_t>(layer)];
  mla_store_kv(kv, k_rope, heads, nope, rope, v, position, k_cache, v_cache, st);
  DecodeAttention att;
  att.q = q;
  att.k_cache = k_cache;
  att.v_cache = v_cache;
  att.k_stride = int64_t{heads} * qk;
  att.v_stride = int64_t{heads} * v;
  att.q_heads = heads;
  att.qk_dim = qk;
  att.v_dim = v;
  att.group = 1;  // every head reads its own expanded key and value
  att.scale = mla_.scale;
  att.position = position;
  att.scores = s.scores;
  att.scores_stride = options().max_positions;
  att.out = s.c;  // heads x v (the normed latent in s.c is consumed by kv_b above)
  decode_attention(att, st);
  launch_linear_matvec(w.o, nullptr, 1, s.c, 0, out, st);
}

void DeepseekV3DeviceForward::enqueue_layer(TpSlot& tp, MoeSlot& slot, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  enqueue_sigmoid_family_layer(
      dims_, type_, eps_, tp, slot.ranks, [&](int r) { return at(r).input_norm; },
      [&](int r, const MoeRankBuffers& s, float* out, cudaStream_t st) {
        attention(at(r), s, l, tp.position(r), inv_freq(r), out, st);
      },
      [&](int r) -> const DeviceSigmoidFamilyMlp& { return at(r).mlp; });
}

}  // namespace

std::unique_ptr<ForwardModel> make_deepseek_v3_device_forward(const ModelProfile& profile,
                                                              const std::vector<RankLayout>& layouts,
                                                              const std::vector<DeviceRankView>& views,
                                                              const DeviceForwardOptions& options) {
  return std::make_unique<DeepseekV3DeviceForward>(profile, layouts, views, options);
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
