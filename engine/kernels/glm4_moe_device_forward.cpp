// glm4_moe device forward: models/forward/glm4_moe_forward.cpp on CUDA devices (fp8-channel weights, GQA with
// q/k/v bias and partial RoPE, dense first layers, sigmoid-routed experts plus the shared expert).
#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/moe_device_blocks.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "models/forward/family_weights.hpp"

namespace wsb::dk {

namespace {

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
    : MoeDeviceForwardBase(p, layouts, views, options, glm4_moe_attention(p.dims).rotary_dim) {
  const ModelDims& d = dims_;
  attn_ = DeviceGqaParams{glm4_moe_attention(d), type_, rope_scale()};
  const int tp = this->tp();
  const SigmoidFamilyWidths widths = sigmoid_family_widths(d, tp);
  need_mlp(sizes(), widths.inter);
  need_mlp(sizes(), widths.shared);
  need_routed_experts(sizes(), d.top_k, widths.im);
  for (int r = 0; r < tp; ++r) {
    need_gqa(sizes(), attn_, llama_rank_heads(d, tp, r));
    std::vector<Layer> layers;
    for (const Glm4MoeLayerWeights& w : bind_glm4_moe_rank(p, rank_storages(), r))
      layers.push_back(Layer{w.input_norm.data, to_device(w.attn), to_device(w.mlp)});
    ranks_.push_back(std::move(layers));
  }
}

void Glm4MoeDeviceForward::enqueue_layer(TpSlot& tp, MoeSlot& slot, int l) const {
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  enqueue_sigmoid_family_layer(
      dims_, type_, eps_, tp, slot.ranks, [&](int r) { return at(r).input_norm; },
      [&](int r, const MoeRankBuffers& s, float* out, cudaStream_t st) {
        gqa_attention(attn_, at(r).attn, s, l, tp.position(r), inv_freq(r), options().max_positions, out, st);
      },
      [&](int r) -> const DeviceSigmoidFamilyMlp& { return at(r).mlp; });
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
