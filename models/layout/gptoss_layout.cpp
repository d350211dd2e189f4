// gpt_oss TP layout with MXFP4 or BF16 experts (storage list and conventions: moe_layout.hpp).
#include <fmt/format.h>

#include "models/layout/llama_layout.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/layout/moe_parts.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/transform/mxfp4.hpp"

namespace wsb {

namespace {

void attention(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp, int rank,
               DType dtype) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const LlamaRankHeads h = llama_rank_heads(d, tp, rank);
  const int64_t hd = d.head_dim, q0 = h.q_head_start * hd, qn = h.q_heads * hd;
  for (std::string_view leaf : {"weight", "bias"})
    s.push_back(
        rows_spec(n(fmt::format("self_attn.qkv_proj.{}", leaf)), dtype, gqa_qkv_rows(c, d, layer, tp, rank, leaf)));
  s.push_back(make_spec(n("self_attn.o_proj.weight"), dtype, {c.slice(n("self_attn.o_proj.weight"), 1, q0, qn)},
                        {d.hidden, qn}));
  s.push_back(replicated(c, n("self_attn.o_proj.bias"), dtype));
  s.push_back(rows_spec(n("self_attn.sinks"), dtype, {c.slice(n("self_attn.sinks"), 0, h.q_head_start, h.q_heads)}));
}

void mxfp4_experts(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                   int rank, DType dtype) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const RankSlice im = gpt_oss_intermediate_slice(d, tp, rank);
  const int64_t e = d.experts, h = d.hidden, hb = h / kMxfp4Block;
  const int64_t lb = im.length / kMxfp4Block, pb = im.padded / kMxfp4Block;
  // gate_up rows are interleaved (2j gate, 2j+1 up), so the rank's rows are the contiguous [2*start, 2*end).
  const std::string gu = n("mlp.experts.gate_up_proj"), dn = n("mlp.experts.down_proj");
  s.push_back(make_spec(n("mlp.experts.w13_weight"), DType::U8,
                        {c.slice(gu + "_blocks", 1, 2 * im.start, 2 * im.length)}, {e, 2 * im.length, hb, 16},
                        kMxfp4Pad, {e, 2 * im.padded, hb, 16}));
  s.push_back(make_spec(n("mlp.experts.w13_weight_scale"), DType::U8,
                        {c.slice(gu + "_scales", 1, 2 * im.start, 2 * im.length)}, {e, 2 * im.length, hb},
                        kMxfp4ScaleSwizzle, mxfp4_scale_swizzled_shape(e, 2 * im.padded, hb)));
  s.push_back(make_spec(n("mlp.experts.w13_bias"), dtype, {c.slice(gu + "_bias", 1, 2 * im.start, 2 * im.length)},
                        {e, 2 * im.length}, kMxfp4Pad, {e, 2 * im.padded}));
  s.push_back(make_spec(n("mlp.experts.w2_weight"), DType::U8, {c.slice(dn + "_blocks", 2, im.start / kMxfp4Block, lb)},
                        {e, h, lb, 16}, kMxfp4Pad, {e, h, pb, 16}));
  s.push_back(make_spec(n("mlp.experts.w2_weight_scale"), DType::U8,
                        {c.slice(dn + "_scales", 2, im.start / kMxfp4Block, lb)}, {e, h, lb}, kMxfp4ScaleSwizzle,
                        mxfp4_scale_swizzled_shape(e, h, pb)));
  s.push_back(make_spec(n("mlp.experts.w2_bias"), dtype, {c.whole(dn + "_bias")}, {e, h}));
}

/// BF16 experts as SGLang's triton_kernels MoE holds them (see moe_layout.hpp): column slices of the canonical
/// [E, in, out] tensors, no transform.
void bf16_experts(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelDims& d, int layer, int tp,
                  int rank, DType dtype) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  const RankSlice im = gpt_oss_bf16_intermediate_slice(d, tp, rank);
  const int64_t e = d.experts, h = d.hidden;
  // gate_up outputs are interleaved (2j gate, 2j+1 up), so the rank's outputs are the contiguous [2*start, 2*end).
  const std::string gu = n("mlp.experts.gate_up_proj"), dn = n("mlp.experts.down_proj");
  s.push_back(make_spec(n("mlp.experts.w13_weight"), dtype, {c.slice(gu, 2, 2 * im.start, 2 * im.length)},
                        {e, h, 2 * im.length}));
  s.push_back(make_spec(n("mlp.experts.w13_bias"), dtype, {c.slice(gu + "_bias", 1, 2 * im.start, 2 * im.length)},
                        {e, 2 * im.length}));
  s.push_back(make_spec(n("mlp.experts.w2_weight"), dtype, {c.slice(dn, 1, im.start, im.length)}, {e, im.length, h}));
  s.push_back(make_spec(n("mlp.experts.w2_bias"), dtype, {c.whole(dn + "_bias")}, {e, h}));
}

/// The MLP half of layer `layer`: the router (weight, bias) and the experts (MXFP4 or BF16).
void mlp(std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, const ModelProfile& p, int layer, int tp, int rank) {
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  s.push_back(replicated(c, n("mlp.router.weight"), p.dtype));
  s.push_back(replicated(c, n("mlp.router.bias"), p.dtype));
  if (p.quantization == kQuantMxfp4) {
    mxfp4_experts(s, c, p.dims, layer, tp, rank, p.dtype);
  } else {
    bf16_experts(s, c, p.dims, layer, tp, rank, p.dtype);
  }
}

}  // namespace

std::vector<RankLayout> build_gpt_oss_layouts(const ModelProfile& p, int tp) {
  require_tp(p, tp);
  require_gqa_tp(p, tp);
  require_divides(p, tp, "vocab", p.dims.vocab);
  if (p.quantization != kQuantMxfp4) require_divides(p, tp, "intermediate", p.dims.intermediate);
  return decoder_rank_layouts(
      p, tp,
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        attention(s, c, p.dims, layer, tp, rank, p.dtype);
      },
      [&](std::vector<RuntimeStorageSpec>& s, const CanonIndex& c, int layer, int rank) {
        mlp(s, c, p, layer, tp, rank);
      });
}

}  // namespace wsb
