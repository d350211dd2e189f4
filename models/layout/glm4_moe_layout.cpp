// glm4_moe TP layout with fp8-channel weights (storage list and conventions: moe_layout.hpp).
#include <fmt/format.h>

#include "models/layout/llama_layout.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/layout/moe_parts.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/transform/fp8_channel.hpp"

namespace wsb {

namespace {

/// An FP8 linear as two storages: "<name>.weight" (transposed/padded) and "<name>.weight_scale" (padded), from
/// weight fragments stacked along the output rows `n` (gathered [n, k]) and the matching scale fragments.
void fp8_linear(std::vector<RuntimeStorageSpec>& s, const std::string& name, std::vector<Fragment> weight,
                std::vector<Fragment> scale, int64_t n, int64_t k) {
  const Shape w{n, k}, sc{n, 1};
  s.push_back(make_spec(name + ".weight", DType::F8_E4M3, std::move(weight), w, kFp8ChannelWeight,
                        fp8_channel_weight_shape(w)));
  s.push_back(make_spec(name + ".weight_scale", DType::F32, std::move(scale), sc, kFp8ChannelScale,
                        fp8_channel_scale_shape(sc)));
}

/// Dense-style MLP (dense layers and shared experts): gate_up_proj = [gate slice; up slice], down_proj
/// input-column slice, under storage prefix `out` from canonical prefix `in`.
void fp8_mlp(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const std::string& in, const std::string& out,
             int64_t hidden, int64_t inter, int tp, int rank) {
  const int64_t per = inter / tp, start = rank * per;
  fp8_linear(
      s, out + ".gate_up_proj",
      {c.slice(in + ".gate_proj.weight", 0, start, per), c.slice(in + ".up_proj.weight", 0, start, per)},
      {c.slice(in + ".gate_proj.weight_scale", 0, start, per), c.slice(in + ".up_proj.weight_scale", 0, start, per)},
      2 * per, hidden);
  fp8_linear(s, out + ".down_proj", {c.slice(in + ".down_proj.weight", 1, start, per)},
             {c.whole(in + ".down_proj.weight_scale")}, hidden, per);
}

void attention(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp, int rank,
               DType dtype) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const LlamaRankHeads h = llama_rank_heads(d, tp, rank);
  const int64_t hd = d.head_dim, q0 = h.q_head_start * hd, qn = h.q_heads * hd, kvn = h.kv_heads * hd;
  auto qkv = [&](std::string_view leaf) { return gqa_qkv_rows(c, d, layer, tp, rank, leaf); };
  fp8_linear(s, n("self_attn.qkv_proj"), qkv("weight"), qkv("weight_scale"), qn + 2 * kvn, d.hidden);
  if (d.attention_bias) s.push_back(rows_spec(n("self_attn.qkv_proj.bias"), dtype, qkv("bias")));
  fp8_linear(s, n("self_attn.o_proj"), {c.slice(n("self_attn.o_proj.weight"), 1, q0, qn)},
             {c.whole(n("self_attn.o_proj.weight_scale"))}, d.hidden, qn);
}

void routed_experts(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                    int rank) {
  const RankSlice im = moe_intermediate_slice(d, tp, rank);
  const int e = d.experts;
  const std::string base = llama_layer_name(layer, "mlp.experts.");
  const Shape w13{e, 2 * im.length, d.hidden}, s13{e, 2 * im.length, 1};
  const Shape w2{e, d.hidden, im.length}, s2{e, d.hidden, 1};
  s.push_back(make_spec(base + "w13_weight", DType::F8_E4M3,
                        expert_row_pairs(c, layer, e, "gate_proj", "up_proj", "weight", im.start, im.length), w13,
                        kFp8ChannelWeight, fp8_channel_weight_shape(w13)));
  s.push_back(make_spec(base + "w13_weight_scale", DType::F32,
                        expert_row_pairs(c, layer, e, "gate_proj", "up_proj", "weight_scale", im.start, im.length), s13,
                        kFp8ChannelScale, fp8_channel_scale_shape(s13)));
  s.push_back(make_spec(base + "w2_weight", DType::F8_E4M3,
                        expert_slices(c, layer, e, "down_proj", "weight", 1, im.start, im.length), w2,
                        kFp8ChannelWeight, fp8_channel_weight_shape(w2)));
  s.push_back(make_spec(base + "w2_weight_scale", DType::F32,
                        expert_slices(c, layer, e, "down_proj", "weight_scale", 0, 0, d.hidden), s2, kFp8ChannelScale,
                        fp8_channel_scale_shape(s2)));
}

/// The MLP half of layer `layer`: the dense FP8 MLP before first_dense_layers; after them the router, its correction
/// bias, the routed experts and the shared experts.
void mlp(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelProfile& p, int layer, int tp, int rank) {
  const ModelDims& d = p.dims;
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  if (!is_moe_layer(d, layer)) {
    fp8_mlp(s, c, n("mlp"), n("mlp"), d.hidden, d.intermediate, tp, rank);
    return;
  }
  s.push_back(replicated(c, n("mlp.gate.weight"), p.dtype));
  s.push_back(replicated(c, n("mlp.gate.e_score_correction_bias"), DType::F32));
  routed_experts(s, c, d, layer, tp, rank);
  if (d.shared_experts > 0)
    fp8_mlp(s, c, n("mlp.shared_experts"), n("mlp.shared_experts"), d.hidden, shared_intermediate(d), tp, rank);
}

}  // namespace

std::vector<RankLayout> build_glm4_moe_layouts(const ModelProfile& p, int tp) {
  require_tp(p, tp);
  require_gqa_tp(p, tp);
  const ModelDims& d = p.dims;
  require_divides(p, tp, "vocab", d.vocab);
  if (d.first_dense_layers > 0) require_divides(p, tp, "intermediate", d.intermediate);
  require_divides(p, tp, "moe_intermediate", d.moe_intermediate);
  if (d.shared_experts > 0) require_divides(p, tp, "shared expert intermediate", shared_intermediate(d));
  return decoder_rank_layouts(
      p, tp,
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        attention(s, c, d, layer, tp, rank, p.dtype);
      },
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        mlp(s, c, p, layer, tp, rank);
      });
}

}  // namespace wsb
