// deepseek_v3 TP layout: MLA attention and NVFP4 or unquantized routed experts (storage list and conventions:
// moe_layout.hpp).
#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/layout/moe_parts.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/transform/nvfp4.hpp"

namespace wsb {

namespace {

/// MLA (SGLang DeepseekV2AttentionMLA): the two down-projections fused and replicated, q_b/kv_b column-parallel
/// by heads, o_proj row-parallel.
void mla_attention(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                   int rank, DType dtype) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const int64_t hr = d.heads / tp, h0 = rank * hr;
  const int64_t qk = mla_qk_head_dim(d), kvb = d.qk_nope_head_dim + d.v_head_dim, v = d.v_head_dim;
  s.push_back(rows_spec(n("self_attn.fused_qkv_a_proj_with_mqa.weight"), dtype,
                        {c.whole(n("self_attn.q_a_proj.weight")), c.whole(n("self_attn.kv_a_proj_with_mqa.weight"))}));
  s.push_back(replicated(c, n("self_attn.q_a_layernorm.weight"), dtype));
  s.push_back(
      rows_spec(n("self_attn.q_b_proj.weight"), dtype, {c.slice(n("self_attn.q_b_proj.weight"), 0, h0 * qk, hr * qk)}));
  s.push_back(replicated(c, n("self_attn.kv_a_layernorm.weight"), dtype));
  s.push_back(rows_spec(n("self_attn.kv_b_proj.weight"), dtype,
                        {c.slice(n("self_attn.kv_b_proj.weight"), 0, h0 * kvb, hr * kvb)}));
  s.push_back(make_spec(n("self_attn.o_proj.weight"), dtype, {c.slice(n("self_attn.o_proj.weight"), 1, h0 * v, hr * v)},
                        {d.hidden, hr * v}));
}

/// BF16 MLP (dense layer, shared experts): gate_up_proj = [gate slice; up slice], down_proj column slice.
void bf16_mlp(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const std::string& base, int64_t hidden,
              int64_t inter, int tp, int rank, DType dtype) {
  const int64_t per = inter / tp, start = rank * per;
  s.push_back(rows_spec(
      base + ".gate_up_proj.weight", dtype,
      {c.slice(base + ".gate_proj.weight", 0, start, per), c.slice(base + ".up_proj.weight", 0, start, per)}));
  s.push_back(make_spec(base + ".down_proj.weight", dtype, {c.slice(base + ".down_proj.weight", 1, start, per)},
                        {hidden, per}));
}

void nvfp4_experts(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                   int rank) {
  const RankSlice im = moe_intermediate_slice(d, tp, rank);
  const RankSlice cols = nvfp4_w2_scale_columns(d, tp, rank);
  const int e = d.experts;
  const int64_t h = d.hidden;
  const std::string base = llama_layer_name(layer, "mlp.experts.");
  // w13 = [up; gate] per expert: FlashInfer's CUTLASS fused MoE computes silu on the second half.
  s.push_back(make_spec(base + "w13_weight", DType::U8,
                        expert_row_pairs(c, layer, e, "up_proj", "gate_proj", "weight", im.start, im.length),
                        {e, 2 * im.length, h / 2}));
  const Shape s13{e, 2 * im.length, h / kNvfp4Block};
  s.push_back(make_spec(base + "w13_weight_scale", DType::F8_E4M3,
                        expert_row_pairs(c, layer, e, "up_proj", "gate_proj", "weight_scale", im.start, im.length), s13,
                        kNvfp4ScaleSwizzle, nvfp4_scale_swizzled_shape(s13)));
  s.push_back(make_spec(base + "w13_weight_scale_2", DType::F32,
                        expert_wholes(c, layer, e, {{"gate_proj", "weight_scale_2"}, {"up_proj", "weight_scale_2"}}),
                        {e, 2}, kNvfp4W13Scale2, {e}));
  s.push_back(make_spec(base + "w13_input_scale", DType::F32,
                        expert_wholes(c, layer, e, {{"gate_proj", "input_scale"}, {"up_proj", "input_scale"}}), {e, 2},
                        kNvfp4W13InputScale, {e}));
  s.push_back(make_spec(base + "w13_alpha", DType::F32,
                        expert_wholes(c, layer, e,
                                      {{"gate_proj", "input_scale"},
                                       {"up_proj", "input_scale"},
                                       {"gate_proj", "weight_scale_2"},
                                       {"up_proj", "weight_scale_2"}}),
                        {e, 4}, kNvfp4W13Alpha, {e}));
  s.push_back(make_spec(base + "w2_weight", DType::U8,
                        expert_slices(c, layer, e, "down_proj", "weight", 1, im.start / 2, im.length / 2),
                        {e, h, im.length / 2}));
  const Shape s2{e, h, cols.length};
  s.push_back(make_spec(base + "w2_weight_scale", DType::F8_E4M3,
                        expert_slices(c, layer, e, "down_proj", "weight_scale", 1, cols.start, cols.length), s2,
                        kNvfp4ScaleSwizzle, nvfp4_scale_swizzled_shape(s2)));
  s.push_back(make_spec(base + "w2_weight_scale_2", DType::F32,
                        expert_wholes(c, layer, e, {{"down_proj", "weight_scale_2"}}), {e}));
  s.push_back(
      make_spec(base + "w2_input_scale", DType::F32, expert_wholes(c, layer, e, {{"down_proj", "input_scale"}}), {e}));
  s.push_back(make_spec(base + "w2_alpha", DType::F32,
                        expert_wholes(c, layer, e, {{"down_proj", "input_scale"}, {"down_proj", "weight_scale_2"}}),
                        {e, 2}, kNvfp4W2Alpha, {e}));
}

/// Unquantized routed experts as SGLang's UnquantizedFusedMoEMethod holds them: w13_weight [E, 2 Im_r, H] ([gate
/// slice; up slice] per expert), w2_weight [E, H, Im_r] (input columns of the rank).
void dense_experts(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                   int rank, DType dtype) {
  const RankSlice im = moe_intermediate_slice(d, tp, rank);
  const int e = d.experts;
  const std::string base = llama_layer_name(layer, "mlp.experts.");
  s.push_back(make_spec(base + "w13_weight", dtype,
                        expert_row_pairs(c, layer, e, "gate_proj", "up_proj", "weight", im.start, im.length),
                        {e, 2 * im.length, d.hidden}));
  s.push_back(make_spec(base + "w2_weight", dtype,
                        expert_slices(c, layer, e, "down_proj", "weight", 1, im.start, im.length),
                        {e, d.hidden, im.length}));
}

/// The MLP half of layer `layer`: the dense BF16 MLP before first_dense_layers; after them the router, its
/// correction bias, the routed experts (NVFP4 or unquantized) and the BF16 shared experts.
void mlp(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelProfile& p, int layer, int tp, int rank) {
  const ModelDims& d = p.dims;
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  if (!is_moe_layer(d, layer)) {
    bf16_mlp(s, c, n("mlp"), d.hidden, d.intermediate, tp, rank, p.dtype);
    return;
  }
  s.push_back(replicated(c, n("mlp.gate.weight"), p.dtype));
  s.push_back(replicated(c, n("mlp.gate.e_score_correction_bias"), DType::F32));
  if (p.quantization == kQuantNvfp4) {
    nvfp4_experts(s, c, d, layer, tp, rank);
  } else {
    dense_experts(s, c, d, layer, tp, rank, p.dtype);
  }
  if (d.shared_experts > 0)
    bf16_mlp(s, c, n("mlp.shared_experts"), d.hidden, shared_intermediate(d), tp, rank, p.dtype);
}

}  // namespace

std::vector<RankLayout> build_deepseek_v3_layouts(const ModelProfile& p, int tp) {
  require_tp(p, tp);
  const ModelDims& d = p.dims;
  require_divides(p, tp, "heads", d.heads);
  require_divides(p, tp, "vocab", d.vocab);
  if (d.first_dense_layers > 0) require_divides(p, tp, "intermediate", d.intermediate);
  require_divides(p, tp, "moe_intermediate", d.moe_intermediate);
  // Two E2M1 codes share a byte: a rank's slice of down_proj's packed K must start and end on a byte.
  if (p.quantization == kQuantNvfp4 && (d.moe_intermediate / tp) % 2 != 0)
    throw Error(ErrorKind::Mismatch,
                fmt::format("profile '{}': tp={} leaves moe_intermediate / tp = {} odd, but NVFP4 packs two codes per "
                            "byte of down_proj",
                            p.id, tp, d.moe_intermediate / tp));
  if (d.shared_experts > 0) require_divides(p, tp, "shared expert intermediate", shared_intermediate(d));
  return decoder_rank_layouts(
      p, tp,
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        mla_attention(s, c, d, layer, tp, rank, p.dtype);
      },
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        mlp(s, c, p, layer, tp, rank);
      });
}

}  // namespace wsb
