// glm4_moe TP layout with fp8-channel or unquantized weights (storage list and conventions: moe_layout.hpp).
#include <fmt/format.h>

#include <functional>

#include "models/layout/llama_layout.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/layout/moe_parts.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/transform/fp8_channel.hpp"

namespace wsb {

namespace {

/// Fragments of one leaf ("weight", "weight_scale") of a linear layer.
using LeafFragments = std::function<std::vector<Fragment>(std::string_view leaf)>;

/// The linear layers of one profile: FP8 (two storages per linear) or unquantized (one).
struct Linears {
  DType dtype;
  bool fp8;

  /// "<name>.weight" of logical shape [n, k] from the weight fragments stacked along the output rows `n`
  /// (gathered [n, k]); for FP8 transposed/padded, with "<name>.weight_scale" (padded) from the scale fragments.
  void add(std::vector<RuntimeStorageSpec>& s, const std::string& name, const LeafFragments& frags, int64_t n,
           int64_t k) const {
    const Shape w{n, k};
    if (!fp8) {
      s.push_back(make_spec(name + ".weight", dtype, frags("weight"), w));
      return;
    }
    const Shape sc{n, 1};
    s.push_back(make_spec(name + ".weight", DType::F8_E4M3, frags("weight"), w, kFp8ChannelWeight,
                          fp8_channel_weight_shape(w)));
    s.push_back(make_spec(name + ".weight_scale", DType::F32, frags("weight_scale"), sc, kFp8ChannelScale,
                          fp8_channel_scale_shape(sc)));
  }
};

/// Dense-style MLP (dense layers and shared experts): gate_up_proj = [gate slice; up slice], down_proj
/// input-column slice (its per-row scale whole), under storage prefix `out` from canonical prefix `in`.
void mlp_block(std::vector<RuntimeStorageSpec>& s, const Linears& lin, const CanonIndex& c, const std::string& in,
               const std::string& out, int64_t hidden, int64_t inter, int tp, int rank) {
  const int64_t per = inter / tp, start = rank * per;
  lin.add(
      s, out + ".gate_up_proj",
      [&](std::string_view leaf) {
        return std::vector<Fragment>{c.slice(fmt::format("{}.gate_proj.{}", in, leaf), 0, start, per),
                                     c.slice(fmt::format("{}.up_proj.{}", in, leaf), 0, start, per)};
      },
      2 * per, hidden);
  lin.add(
      s, out + ".down_proj",
      [&](std::string_view leaf) {
        const std::string name = fmt::format("{}.down_proj.{}", in, leaf);
        return std::vector<Fragment>{leaf == "weight" ? c.slice(name, 1, start, per) : c.whole(name)};
      },
      hidden, per);
}

void attention(std::vector<RuntimeStorageSpec>& s, const Linears& lin, const CanonIndex& c, const ModelDims& d,
               int layer, int tp, int rank) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const LlamaRankHeads h = llama_rank_heads(d, tp, rank);
  const int64_t hd = d.head_dim, q0 = h.q_head_start * hd, qn = h.q_heads * hd, kvn = h.kv_heads * hd;
  auto qkv = [&](std::string_view leaf) { return gqa_qkv_rows(c, d, layer, tp, rank, leaf); };
  lin.add(s, n("self_attn.qkv_proj"), qkv, qn + 2 * kvn, d.hidden);
  if (d.attention_bias) s.push_back(rows_spec(n("self_attn.qkv_proj.bias"), lin.dtype, qkv("bias")));
  lin.add(
      s, n("self_attn.o_proj"),
      [&](std::string_view leaf) {
        const std::string name = n(fmt::format("self_attn.o_proj.{}", leaf));
        return std::vector<Fragment>{leaf == "weight" ? c.slice(name, 1, q0, qn) : c.whole(name)};
      },
      d.hidden, qn);
}

void routed_experts(std::vector<RuntimeStorageSpec>& s, const Linears& lin, const CanonIndex& c, const ModelDims& d,
                    int layer, int tp, int rank) {
  const RankSlice im = moe_intermediate_slice(d, tp, rank);
  const int e = d.experts;
  const std::string base = llama_layer_name(layer, "mlp.experts.");
  const Shape w13{e, 2 * im.length, d.hidden}, w2{e, d.hidden, im.length};
  auto w13_frags = [&](std::string_view leaf) {
    return expert_row_pairs(c, layer, e, "gate_proj", "up_proj", leaf, im.start, im.length);
  };
  auto w2_weight = [&] { return expert_slices(c, layer, e, "down_proj", "weight", 1, im.start, im.length); };
  if (!lin.fp8) {
    // SGLang UnquantizedFusedMoEMethod: w13_weight [E, 2 I, H] ([gate; up] per expert), w2_weight [E, H, I].
    s.push_back(make_spec(base + "w13_weight", lin.dtype, w13_frags("weight"), w13));
    s.push_back(make_spec(base + "w2_weight", lin.dtype, w2_weight(), w2));
    return;
  }
  const Shape s13{e, 2 * im.length, 1}, s2{e, d.hidden, 1};
  s.push_back(make_spec(base + "w13_weight", DType::F8_E4M3, w13_frags("weight"), w13, kFp8ChannelWeight,
                        fp8_channel_weight_shape(w13)));
  s.push_back(make_spec(base + "w13_weight_scale", DType::F32, w13_frags("weight_scale"), s13, kFp8ChannelScale,
                        fp8_channel_scale_shape(s13)));
  s.push_back(make_spec(base + "w2_weight", DType::F8_E4M3, w2_weight(), w2, kFp8ChannelWeight,
                        fp8_channel_weight_shape(w2)));
  s.push_back(make_spec(base + "w2_weight_scale", DType::F32,
                        expert_slices(c, layer, e, "down_proj", "weight_scale", 0, 0, d.hidden), s2, kFp8ChannelScale,
                        fp8_channel_scale_shape(s2)));
}

/// The MLP half of layer `layer`: the dense MLP before first_dense_layers; after them the router, its correction
/// bias, the routed experts and the shared experts.
void mlp(std::vector<RuntimeStorageSpec>& s, const Linears& lin, const CanonIndex& c, const ModelProfile& p,
         int layer, int tp, int rank) {
  const ModelDims& d = p.dims;
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  if (!is_moe_layer(d, layer)) {
    mlp_block(s, lin, c, n("mlp"), n("mlp"), d.hidden, d.intermediate, tp, rank);
    return;
  }
  s.push_back(replicated(c, n("mlp.gate.weight"), p.dtype));
  s.push_back(replicated(c, n("mlp.gate.e_score_correction_bias"), DType::F32));
  routed_experts(s, lin, c, d, layer, tp, rank);
  if (d.shared_experts > 0)
    mlp_block(s, lin, c, n("mlp.shared_experts"), n("mlp.shared_experts"), d.hidden, shared_intermediate(d), tp, rank);
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
  const Linears lin{p.dtype, p.quantization == kQuantFp8Channel};
  return decoder_rank_layouts(
      p, tp,
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        attention(s, lin, c, d, layer, tp, rank);
      },
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        mlp(s, lin, c, p, layer, tp, rank);
      });
}

}  // namespace wsb
