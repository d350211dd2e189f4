// glm4_moe device forward: models/forward/glm4_moe_forward.cpp on CUDA devices (fp8-channel weights, GQA with
// q/k/v bias and partial RoPE, dense first layers, sigmoid-routed experts plus the shared expert).
#ifdef WSBENCH_HAVE_CUDA
#include <cmath>

#include "engine/kernels/moe_device_blocks.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "engine/quant/device_linear_bind.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb::dk {

namespace {

/// transformers Glm4MoeRotaryEmbedding: dim = int(head_dim * partial_rotary_factor) (glm4_moe_forward.cpp).
int rotary_dim(const ModelProfile& p) { return static_cast<int>(p.dims.head_dim * p.dims.partial_rotary_factor); }

class Glm4MoeDeviceForward final : public MoeDeviceForwardBase {
 public:
  Glm4MoeDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                       const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options);

 private:
  struct Layer {
    const uint8_t* input_norm = nullptr;
    DeviceGqaRank attn;
    DeviceSigmoidFamilyMlp mlp;
  };

  void enqueue_layer(TpSlot& tp, MoeSlot& slot, int layer) const override;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  DeviceGqaParams attn_;
};

Glm4MoeDeviceForward::Glm4MoeDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                           const std::vector<DeviceRankView>& views,
                                           const DeviceForwardOptions& options)
    : MoeDeviceForwardBase(p, layouts, views, options, rotary_dim(p)) {
  const ModelDims& d = dims_;
  const int64_t h = d.hidden, hd = d.head_dim;
  attn_ = DeviceGqaParams{d.heads, d.kv_heads, d.head_dim, rotary_dim(p), 0,
                          static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim))), type_};
  const int tp = this->tp();
  const int64_t inter = d.intermediate / tp, im = moe_intermediate_slice(d, tp, 0).length;
  const int64_t shared = d.shared_experts > 0 ? shared_intermediate(d) / tp : 0;
  need_mlp(sizes(), inter);
  need_mlp(sizes(), shared);
  need_routed_experts(sizes(), d.top_k, im);
  for (int r = 0; r < tp; ++r) {
    const LlamaRankHeads heads = llama_rank_heads(d, tp, r);
    need_gqa(sizes(), attn_, heads);
    const int64_t q_rows = heads.q_heads * hd, qkv_rows = q_rows + 2 * int64_t{heads.kv_heads} * hd;
    std::vector<Layer> layers;
    for (int l = 0; l < d.layers; ++l) {
      auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
      // "<base><sep>weight" and "<base><sep>weight_scale": sep "." for linears, "_" for the stacked experts.
      auto fp8 = [&](const std::string& base, int64_t rows, int64_t cols, const char* sep = ".") {
        return to_device_linear(fp8_linear(ref(r, base + sep + "weight"), ref(r, base + sep + "weight_scale"), rows,
                                           cols));
      };
      Layer w;
      w.input_norm = vec(r, n("input_layernorm.weight"), p.dtype, {h});
      w.attn.heads = heads;
      w.attn.qkv = fp8(n("self_attn.qkv_proj"), qkv_rows, h);
      if (d.attention_bias) w.attn.qkv_bias = vec(r, n("self_attn.qkv_proj.bias"), p.dtype, {qkv_rows});
      w.attn.o = fp8(n("self_attn.o_proj"), h, q_rows);
      DeviceSigmoidFamilyMlp& m = w.mlp;
      m.post_norm = vec(r, n("post_attention_layernorm.weight"), p.dtype, {h});
      m.moe = is_moe_layer(d, l);
      if (!m.moe) {
        m.dense.gate_up = fp8(n("mlp.gate_up_proj"), 2 * inter, h);
        m.dense.down = fp8(n("mlp.down_proj"), h, inter);
      } else {
        DeviceSigmoidMoe& e = m.experts;
        e.gate = to_device_linear(dense_linear(ref(r, n("mlp.gate.weight")), d.experts, h));
        e.correction_bias = reinterpret_cast<const float*>(
            vec(r, n("mlp.gate.e_score_correction_bias"), DType::F32, {d.experts}));
        e.w13 = fp8(n("mlp.experts.w13"), 2 * im, h, "_");
        e.w2 = fp8(n("mlp.experts.w2"), h, im, "_");
        e.has_shared = shared > 0;
        if (e.has_shared) {
          e.shared.gate_up = fp8(n("mlp.shared_experts.gate_up_proj"), 2 * shared, h);
          e.shared.down = fp8(n("mlp.shared_experts.down_proj"), h, shared);
        }
      }
      layers.push_back(w);
    }
    ranks_.push_back(std::move(layers));
  }
}

void Glm4MoeDeviceForward::enqueue_layer(TpSlot& tp, MoeSlot& slot, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    const MoeRankBuffers& s = slot.ranks[static_cast<size_t>(r)];
    rms_norm(x, at(r).input_norm, type_, dims_.hidden, eps_, s.h, st);
    gqa_attention(attn_, at(r).attn, s, l, tp.position(r), inv_freq(r), options().max_positions, out, st);
  });
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    sigmoid_family_mlp(dims_, type_, eps_, at(r).mlp, x, slot.ranks[static_cast<size_t>(r)], out, st);
  });
}

}  // namespace

std::unique_ptr<ForwardModel> make_glm4_moe_device_forward(const ModelProfile& profile,
                                                           const std::vector<RankLayout>& layouts,
                                                           const std::vector<DeviceRankView>& views,
                                                           const DeviceForwardOptions& options) {
  return std::make_unique<Glm4MoeDeviceForward>(profile, layouts, views, options);
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
