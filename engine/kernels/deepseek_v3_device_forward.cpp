// deepseek_v3 device forward: models/forward/deepseek_v3_forward.cpp on CUDA devices (MLA with naive latent
// expansion, interleaved RoPE, BF16 dense layers and shared expert, NVFP4 routed experts with w13 = [up; gate]).
#ifdef WSBENCH_HAVE_CUDA
#include <algorithm>
#include <cmath>

#include "engine/kernels/moe_device_blocks.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "engine/kernels/moe_kernels.hpp"
#include "engine/quant/device_linear_bind.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

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
  int heads_ = 0;                          // per rank
  int nope_ = 0, rope_ = 0, qk_ = 0, v_ = 0;
  float scale_ = 1.0f;
};

DeepseekV3DeviceForward::DeepseekV3DeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                                 const std::vector<DeviceRankView>& views,
                                                 const DeviceForwardOptions& options)
    // DeepseekV3RotaryEmbedding runs over qk_rope_head_dim (deepseek_v3_forward.cpp).
    : MoeDeviceForwardBase(p, layouts, views, options, p.dims.qk_rope_head_dim) {
  const ModelDims& d = dims_;
  const int tp = this->tp();
  const int64_t h = d.hidden;
  heads_ = d.heads / tp;
  nope_ = d.qk_nope_head_dim;
  rope_ = d.qk_rope_head_dim;
  qk_ = mla_qk_head_dim(d);
  v_ = d.v_head_dim;
  // transformers DeepseekV3Attention: scaling = qk_head_dim ** -0.5 (no YaRN mscale, moe_forward.hpp).
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(qk_)));
  const int64_t a_rows = int64_t{d.q_lora_rank} + d.kv_lora_rank + rope_;
  const int64_t q_rows = int64_t{heads_} * qk_, kv_rows = int64_t{heads_} * (nope_ + v_), o_cols = int64_t{heads_} * v_;
  const int64_t inter = d.intermediate / tp, im = moe_intermediate_slice(d, tp, 0).length;
  const int64_t shared = d.shared_experts > 0 ? shared_intermediate(d) / tp : 0;
  MoeBufferSizes& z = sizes();
  z.scratch = std::max({z.scratch, a_rows, q_rows, kv_rows, int64_t{d.q_lora_rank}, int64_t{d.kv_lora_rank}, o_cols});
  z.q_heads = std::max<int64_t>(z.q_heads, heads_);
  z.k_width = std::max(z.k_width, q_rows);
  z.v_width = std::max(z.v_width, o_cols);
  need_mlp(z, inter);
  need_mlp(z, shared);
  need_routed_experts(z, d.top_k, im);
  for (int r = 0; r < tp; ++r) {
    std::vector<Layer> layers;
    for (int l = 0; l < d.layers; ++l) {
      auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
      auto bf16 = [&](const std::string& name, int64_t rows, int64_t cols) {
        return to_device_linear(dense_linear(ref(r, name), rows, cols));
      };
      Layer w;
      w.input_norm = vec(r, n("input_layernorm.weight"), p.dtype, {h});
      w.q_a_norm = vec(r, n("self_attn.q_a_layernorm.weight"), p.dtype, {d.q_lora_rank});
      w.kv_a_norm = vec(r, n("self_attn.kv_a_layernorm.weight"), p.dtype, {d.kv_lora_rank});
      w.qkv_a = bf16(n("self_attn.fused_qkv_a_proj_with_mqa.weight"), a_rows, h);
      w.q_b = bf16(n("self_attn.q_b_proj.weight"), q_rows, d.q_lora_rank);
      w.kv_b = bf16(n("self_attn.kv_b_proj.weight"), kv_rows, d.kv_lora_rank);
      w.o = bf16(n("self_attn.o_proj.weight"), h, o_cols);
      DeviceSigmoidFamilyMlp& m = w.mlp;
      m.post_norm = vec(r, n("post_attention_layernorm.weight"), p.dtype, {h});
      m.moe = is_moe_layer(d, l);
      if (!m.moe) {
        m.dense.gate_up = bf16(n("mlp.gate_up_proj.weight"), 2 * inter, h);
        m.dense.down = bf16(n("mlp.down_proj.weight"), h, inter);
      } else {
        DeviceSigmoidMoe& x = m.experts;
        const std::string e = n("mlp.experts.");
        x.gate = bf16(n("mlp.gate.weight"), d.experts, h);
        x.correction_bias = reinterpret_cast<const float*>(
            vec(r, n("mlp.gate.e_score_correction_bias"), DType::F32, {d.experts}));
        x.w13 = to_device_linear(nvfp4_linear(ref(r, e + "w13_weight"), ref(r, e + "w13_weight_scale"),
                                              ref(r, e + "w13_alpha"), ref(r, e + "w13_input_scale"), 2 * im, h, 0));
        // A w2 shard starting inside a 16-block reads its first scale column at that block's phase
        // (nvfp4_w2_scale_columns).
        const int64_t k_phase = moe_intermediate_slice(d, tp, r).start % kNvfp4Block;
        x.w2 = to_device_linear(nvfp4_linear(ref(r, e + "w2_weight"), ref(r, e + "w2_weight_scale"),
                                             ref(r, e + "w2_alpha"), ref(r, e + "w2_input_scale"), h, im, k_phase));
        x.up_first = true;  // FlashInfer CUTLASS w13 = [up; gate] (moe_layout.hpp)
        x.has_shared = shared > 0;
        if (x.has_shared) {
          x.shared.gate_up = bf16(n("mlp.shared_experts.gate_up_proj.weight"), 2 * shared, h);
          x.shared.down = bf16(n("mlp.shared_experts.down_proj.weight"), h, shared);
        }
      }
      layers.push_back(w);
    }
    ranks_.push_back(std::move(layers));
  }
}

void DeepseekV3DeviceForward::attention(const Layer& w, const MoeRankBuffers& s, int layer, const int32_t* position,
                                        const float* inv_freq, float* out, cudaStream_t st) const {
  const ModelDims& d = dims_;
  float* a = s.a;  // [q_lora | latent | k_rope]
  launch_linear_matvec(w.qkv_a, nullptr, 1, s.h, 0, a, st);
  float* q = s.b;  // heads x [nope | rope]
  rms_norm(a, w.q_a_norm, type_, d.q_lora_rank, eps_, s.c, st);
  launch_linear_matvec(w.q_b, nullptr, 1, s.c, 0, q, st);
  float* kv = s.d;  // heads x [k_nope | v]
  rms_norm(a + d.q_lora_rank, w.kv_a_norm, type_, d.kv_lora_rank, eps_, s.c, st);
  launch_linear_matvec(w.kv_b, nullptr, 1, s.c, 0, kv, st);
  float* k_rope = a + d.q_lora_rank + d.kv_lora_rank;
  rope_interleaved(k_rope, 1, rope_, rope_, inv_freq, position, st);
  rope_interleaved(q + nope_, heads_, qk_, rope_, inv_freq, position, st);
  // Naive expansion: each head's key is [k_nope | shared k_rope], its value v; both cached per head.
  float* k_cache = s.k[static_cast<size_t>(layer)];
  float* v_cache = s.v[static_cast<size_t>(layer)];
  mla_store_kv(kv, k_rope, heads_, nope_, rope_, v_, position, k_cache, v_cache, st);
  DecodeAttention att;
  att.q = q;
  att.k_cache = k_cache;
  att.v_cache = v_cache;
  att.k_stride = int64_t{heads_} * qk_;
  att.v_stride = int64_t{heads_} * v_;
  att.q_heads = heads_;
  att.qk_dim = qk_;
  att.v_dim = v_;
  att.group = 1;  // every head reads its own expanded key and value
  att.scale = scale_;
  att.position = position;
  att.scores = s.scores;
  att.scores_stride = options().max_positions;
  att.out = s.c;  // heads x v (the normed latent in s.c is consumed by kv_b above)
  decode_attention(att, st);
  launch_linear_matvec(w.o, nullptr, 1, s.c, 0, out, st);
}

void DeepseekV3DeviceForward::enqueue_layer(TpSlot& tp, MoeSlot& slot, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    const MoeRankBuffers& s = slot.ranks[static_cast<size_t>(r)];
    rms_norm(x, at(r).input_norm, type_, dims_.hidden, eps_, s.h, st);
    attention(at(r), s, l, tp.position(r), inv_freq(r), out, st);
  });
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    sigmoid_family_mlp(dims_, type_, eps_, at(r).mlp, x, slot.ranks[static_cast<size_t>(r)], out, st);
  });
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
