// gpt_oss device forward: models/forward/gpt_oss_forward.cpp on CUDA devices (GQA with biases, sinks and alternating
// sliding windows; softmax-routed MXFP4 or BF16 experts with biases and the clamped SwiGLU).
#ifdef WSBENCH_HAVE_CUDA
#include <algorithm>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/moe_device_blocks.hpp"
#include "engine/kernels/moe_device_forwards.hpp"
#include "engine/kernels/moe_kernels.hpp"
#include "engine/quant/device_linear_bind.hpp"
#include "models/forward/family_weights.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb::dk {

namespace {

class GptOssDeviceForward final : public MoeDeviceForwardBase {
 public:
  GptOssDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                      const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options);

 private:
  struct Layer {
    const uint8_t* input_norm = nullptr;
    const uint8_t* post_norm = nullptr;
    const uint8_t* o_bias = nullptr;
    DeviceGqaRank attn;
    DeviceLinear router;
    const uint8_t* router_bias = nullptr;
    DeviceLinear w13, w2;
    const uint8_t* w13_bias = nullptr;
    const uint8_t* w2_bias = nullptr;
  };

  void enqueue_layer(TpSlot& tp, MoeSlot& slot, int layer) const override;
  /// One rank's MoE into `out`: sum over the chosen experts (ascending id) of weight * (w2 @ act), without the
  /// down_proj bias; rank 0 also writes s.bias_sum = sum of weight * down_proj bias (added after the reduction).
  void experts(const Layer& w, int rank, const MoeRankBuffers& s, const float* x, float* out, cudaStream_t st) const;
  /// The residual add after a reduction that must add a rank-0 vector first, in the CPU's order:
  /// x = x_before + ((p0 + p1 + ...) + extra). `enqueue_reduce` runs TpSlot::rank_partials(copy_x, accumulate
  /// false, ...), which leaves the reduced sum in tp.x(); x_before is kept in rank 0's s.residual.
  template <typename Reduce, typename Extra>
  void reduce_then_add(TpSlot& tp, const MoeRankBuffers& rank0, Reduce enqueue_reduce, Extra add_extra) const;

  std::vector<std::vector<Layer>> ranks_;  // [rank][layer]
  std::vector<RankSlice> inter_;           // [rank] expert intermediate slice
  DeviceGqaParams attn_;
};

GptOssDeviceForward::GptOssDeviceForward(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                         const std::vector<DeviceRankView>& views,
                                         const DeviceForwardOptions& options)
    // transformers GptOssRotaryEmbedding: inv_freq over head_dim, YaRN when rope_scaling says so.
    : MoeDeviceForwardBase(p, layouts, views, options, gpt_oss_attention(p.dims).rotary_dim) {
  const ModelDims& d = dims_;
  const int tp = this->tp();
  attn_ = DeviceGqaParams{gpt_oss_attention(d), type_, rope_scale()};
  for (int r = 0; r < tp; ++r) {
    need_gqa(sizes(), attn_, llama_rank_heads(d, tp, r));
    const RankSlice im = gpt_oss_expert_slice(p, tp, r);
    inter_.push_back(im);
    need_routed_experts(sizes(), d.top_k, im.length);
    std::vector<Layer> layers;
    for (const GptOssLayerWeights& b : bind_gpt_oss_rank(p, rank_storages(), r)) {
      Layer w;
      w.input_norm = b.input_norm.data;
      w.post_norm = b.post_norm.data;
      w.o_bias = b.o_bias.data;
      w.attn = to_device(b.attn);
      w.router = to_device_linear(b.router);
      w.router_bias = b.router_bias.data;
      w.w13_bias = b.w13_bias.data;
      w.w2_bias = b.w2_bias.data;
      // A rank whose slice of the intermediate is empty (tp beyond its 32-blocks) has no expert matvecs to run.
      if (im.length > 0) {
        w.w13 = to_device_linear(b.w13);
        w.w2 = to_device_linear(b.w2);
      }
      layers.push_back(w);
    }
    ranks_.push_back(std::move(layers));
  }
}

void GptOssDeviceForward::experts(const Layer& w, int rank, const MoeRankBuffers& s, const float* x, float* out,
                                  cudaStream_t st) const {
  const ModelDims& d = dims_;
  const RankSlice& im = inter_[static_cast<size_t>(rank)];
  const int top_k = d.top_k;
  rms_norm(x, w.post_norm, type_, d.hidden, eps_, s.h, st);
  launch_linear_matvec(w.router, nullptr, 1, s.h, 0, s.logits, st);
  softmax_topk_route(s.logits, w.router_bias, type_, d.experts, top_k, s.ids, s.weights, st);
  const int slots = im.length > 0 ? top_k : 0;
  if (slots > 0) {
    // Slot j is expert s.ids[j]: interleaved gate/up rows (2j gate, 2j + 1 up) plus the expert's bias row.
    launch_linear_matvec(w.w13, s.ids, slots, s.h, 0, s.gate_up, st);
    add_expert_bias(s.gate_up, slots, 2 * im.length, w.w13_bias, type_, 2 * im.padded, s.ids, st);
    clamped_swiglu_slots(s.gate_up, slots, im.length, 2 * im.length, static_cast<float>(d.swiglu_limit), s.act, st);
    launch_linear_matvec(w.w2, s.ids, slots, s.act, im.length, s.expert_out, st);
  }
  moe_combine(s.expert_out, s.weights, slots, d.hidden, nullptr, out, st);
  if (rank == 0) expert_bias_sum(w.w2_bias, type_, d.hidden, s.ids, s.weights, top_k, d.hidden, s.bias_sum, st);
}

template <typename Reduce, typename Extra>
void GptOssDeviceForward::reduce_then_add(TpSlot& tp, const MoeRankBuffers& rank0, Reduce enqueue_reduce,
                                          Extra add_extra) const {
  set_device(topology().lane_device[0]);
  copy_floats(rank0.residual, tp.x(), dims_.hidden, tp.main_stream());
  enqueue_reduce();  // tp.x() = ((p0 + p1) + ...)
  set_device(topology().lane_device[0]);
  add_extra(tp.main_stream());                                           // sum += extra (rank 0's copy)
  add_inplace(tp.x(), rank0.residual, dims_.hidden, tp.main_stream());  // sum + x == x + sum (commutative)
}

void GptOssDeviceForward::enqueue_layer(TpSlot& tp, MoeSlot& slot, int l) const {
  DeviceGqaParams params = attn_;
  params.window = gpt_oss_is_sliding(l) ? dims_.sliding_window : 0;
  auto at = [&](int r) -> const Layer& { return ranks_[static_cast<size_t>(r)][static_cast<size_t>(l)]; };
  const MoeRankBuffers& rank0 = slot.ranks[0];
  // Row-parallel o_proj bias: once, after the reduction (rank 0's copy).
  reduce_then_add(
      tp, rank0,
      [&] {
        tp.rank_partials(true, false, [&](int r, cudaStream_t st, const float* x, float* out) {
          const MoeRankBuffers& s = slot.ranks[static_cast<size_t>(r)];
          rms_norm(x, at(r).input_norm, type_, dims_.hidden, eps_, s.h, st);
          gqa_attention(params, at(r).attn, s, l, tp.position(r), inv_freq(r), options().max_positions, out, st);
        });
      },
      [&](cudaStream_t st) { add_bias(tp.x(), at(0).o_bias, type_, dims_.hidden, st); });
  // Expert down_proj biases weighted by rank 0's routing, once, after the reduction.
  reduce_then_add(
      tp, rank0,
      [&] {
        tp.rank_partials(true, false, [&](int r, cudaStream_t st, const float* x, float* out) {
          experts(at(r), r, slot.ranks[static_cast<size_t>(r)], x, out, st);
        });
      },
      [&](cudaStream_t st) { add_inplace(tp.x(), rank0.bias_sum, dims_.hidden, st); });
}

}  // namespace

std::unique_ptr<ForwardModel> make_gpt_oss_device_forward(const ModelProfile& profile,
                                                          const std::vector<RankLayout>& layouts,
                                                          const std::vector<DeviceRankView>& views,
                                                          const DeviceForwardOptions& options) {
  return std::make_unique<GptOssDeviceForward>(profile, layouts, views, options);
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
