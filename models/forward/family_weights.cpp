#include "models/forward/family_weights.hpp"

#include <cmath>
#include <string>
#include <string_view>

#include "models/forward/rope_yarn.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Binds the MLP half of a glm4_moe / deepseek_v3 layer. `projection(module, rows, cols)` binds a dense-layer or
/// shared-expert projection in the family's format ("<layer>.mlp.gate_up_proj" etc., no ".weight" suffix);
/// `experts(base, rows, cols, k_phase)` binds the stacked routed experts "<layer>.mlp.experts.w13" / ".w2".
template <typename Projection, typename Experts>
SigmoidFamilyMlp bind_sigmoid_family_mlp(const ModelProfile& p, const RankStorages& s, int rank, int layer,
                                         const SigmoidFamilyWidths& widths, bool up_first, Projection projection,
                                         Experts experts) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden;
  auto n = [layer](std::string_view leaf) { return llama_layer_name(layer, leaf); };
  SigmoidFamilyMlp m;
  m.post_norm = s.vec(rank, n("post_attention_layernorm.weight"), p.dtype, {h});
  m.moe = is_moe_layer(d, layer);
  if (!m.moe) {
    m.gate_up = projection(n("mlp.gate_up_proj"), 2 * widths.inter, h);
    m.down = projection(n("mlp.down_proj"), h, widths.inter);
    return m;
  }
  SigmoidMoeRank& e = m.experts;
  e.gate = dense_linear(s.ref(rank, n("mlp.gate.weight")), d.experts, h);
  e.correction_bias = s.vec(rank, n("mlp.gate.e_score_correction_bias"), DType::F32, {d.experts});
  e.w13 = experts(n("mlp.experts.w13"), 2 * widths.im, h, 0);
  // A w2 shard starting inside a quantization block reads its first scale column at that block's phase
  // (nvfp4_w2_scale_columns); formats without such blocks ignore it.
  e.w2 = experts(n("mlp.experts.w2"), h, widths.im,
                 moe_intermediate_slice(d, s.tp(), rank).start % kNvfp4Block);
  e.up_first = up_first;
  e.has_shared = widths.shared > 0;
  if (e.has_shared) {
    e.shared_gate_up = projection(n("mlp.shared_experts.gate_up_proj"), 2 * widths.shared, h);
    e.shared_down = projection(n("mlp.shared_experts.down_proj"), h, widths.shared);
  }
  return m;
}

}  // namespace

VocabEnds bind_vocab_ends(const ModelProfile& p, const RankStorages& s, int rank) {
  const int64_t vocab_rows = p.dims.vocab / s.tp(), hidden = p.dims.hidden;
  VocabEnds e;
  e.embed = dense_linear(s.ref(rank, "model.embed_tokens.weight"), vocab_rows, hidden).weight;
  e.norm = s.vec(rank, "model.norm.weight", p.dtype, {hidden});
  e.lm_head = dense_linear(s.ref(rank, "lm_head.weight"), vocab_rows, hidden).weight;
  return e;
}

float attention_scale(int dim) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))); }

LlamaRankWeights bind_llama_rank(const ModelProfile& p, const RankStorages& s, int rank) {
  auto ptr = [&](const std::string& name) { return s.ref(rank, name).data; };
  LlamaRankWeights w;
  w.ends = bind_vocab_ends(p, s, rank);
  for (int l = 0; l < p.dims.layers; ++l) {
    LlamaLayerWeights layer;
    layer.input_norm = ptr(llama_layer_name(l, "input_layernorm.weight"));
    layer.qkv = ptr(llama_layer_name(l, "self_attn.qkv_proj.weight"));
    layer.o = ptr(llama_layer_name(l, "self_attn.o_proj.weight"));
    layer.post_norm = ptr(llama_layer_name(l, "post_attention_layernorm.weight"));
    layer.gate_up = ptr(llama_layer_name(l, "mlp.gate_up_proj.weight"));
    layer.down = ptr(llama_layer_name(l, "mlp.down_proj.weight"));
    w.layers.push_back(layer);
  }
  return w;
}

GqaShape glm4_moe_attention(const ModelDims& d) {
  const int rotary = static_cast<int>(d.head_dim * d.partial_rotary_factor);
  return GqaShape{d.heads, d.kv_heads, d.head_dim, rotary, 0, attention_scale(d.head_dim)};
}

GqaShape gpt_oss_attention(const ModelDims& d) {
  return GqaShape{d.heads, d.kv_heads, d.head_dim, d.head_dim, 0, attention_scale(d.head_dim)};
}

SigmoidFamilyWidths sigmoid_family_widths(const ModelDims& d, int tp) {
  SigmoidFamilyWidths w;
  w.inter = d.intermediate / tp;
  w.im = moe_intermediate_slice(d, tp, 0).length;
  w.shared = d.shared_experts > 0 ? shared_intermediate(d) / tp : 0;
  return w;
}

MlaShape deepseek_v3_attention(const ModelDims& d, int tp) {
  MlaShape m;
  m.heads = d.heads / tp;
  m.nope = d.qk_nope_head_dim;
  m.rope = d.qk_rope_head_dim;
  m.qk = mla_qk_head_dim(d);
  m.v = d.v_head_dim;
  m.scale = mla_softmax_scale(m.qk, d.rope_scaling);
  m.a_rows = int64_t{d.q_lora_rank} + d.kv_lora_rank + m.rope;
  m.q_rows = int64_t{m.heads} * m.qk;
  m.kv_rows = int64_t{m.heads} * (m.nope + m.v);
  m.o_cols = int64_t{m.heads} * m.v;
  return m;
}

std::vector<Glm4MoeLayerWeights> bind_glm4_moe_rank(const ModelProfile& p, const RankStorages& s, int r) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, hd = d.head_dim;
  const SigmoidFamilyWidths widths = sigmoid_family_widths(d, s.tp());
  const LlamaRankHeads heads = llama_rank_heads(d, s.tp(), r);
  const int64_t q_rows = heads.q_heads * hd, qkv_rows = q_rows + 2 * int64_t{heads.kv_heads} * hd;
  // "<base><sep>weight" and "<base><sep>weight_scale": sep "." for linears, "_" for the stacked experts.
  const bool is_fp8 = p.quantization == kQuantFp8Channel;
  auto fp8 = [&](const std::string& base, int64_t rows, int64_t cols, const char* sep) {
    if (!is_fp8) return dense_linear(s.ref(r, base + sep + "weight"), rows, cols);
    return fp8_linear(s.ref(r, base + sep + "weight"), s.ref(r, base + sep + "weight_scale"), rows, cols);
  };
  auto projection = [&](const std::string& module, int64_t rows, int64_t cols) { return fp8(module, rows, cols, "."); };
  auto experts = [&](const std::string& base, int64_t rows, int64_t cols, int64_t) {
    return fp8(base, rows, cols, "_");
  };
  std::vector<Glm4MoeLayerWeights> layers;
  for (int l = 0; l < d.layers; ++l) {
    auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
    Glm4MoeLayerWeights w;
    w.input_norm = s.vec(r, n("input_layernorm.weight"), p.dtype, {h});
    w.attn.heads = heads;
    w.attn.qkv = projection(n("self_attn.qkv_proj"), qkv_rows, h);
    if (d.attention_bias) w.attn.qkv_bias = s.vec(r, n("self_attn.qkv_proj.bias"), p.dtype, {qkv_rows});
    w.attn.o = projection(n("self_attn.o_proj"), h, q_rows);
    w.mlp = bind_sigmoid_family_mlp(p, s, r, l, widths, false, projection, experts);
    layers.push_back(w);
  }
  return layers;
}

std::vector<DeepseekV3LayerWeights> bind_deepseek_v3_rank(const ModelProfile& p, const RankStorages& s, int r) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden;
  const MlaShape m = deepseek_v3_attention(d, s.tp());
  const SigmoidFamilyWidths widths = sigmoid_family_widths(d, s.tp());
  auto bf16 = [&](const std::string& name, int64_t rows, int64_t cols) {
    return dense_linear(s.ref(r, name), rows, cols);
  };
  auto projection = [&](const std::string& module, int64_t rows, int64_t cols) {
    return bf16(module + ".weight", rows, cols);
  };
  // FlashInfer CUTLASS NVFP4 experts: "<base>_weight", "_weight_scale", "_alpha", "_input_scale" (moe_layout.hpp);
  // unquantized experts: "<base>_weight" alone.
  const bool is_nvfp4 = p.quantization == kQuantNvfp4;
  auto experts = [&](const std::string& base, int64_t rows, int64_t cols, int64_t k_phase) {
    if (!is_nvfp4) return dense_linear(s.ref(r, base + "_weight"), rows, cols);
    return nvfp4_linear(s.ref(r, base + "_weight"), s.ref(r, base + "_weight_scale"), s.ref(r, base + "_alpha"),
                        s.ref(r, base + "_input_scale"), rows, cols, k_phase);
  };
  std::vector<DeepseekV3LayerWeights> layers;
  for (int l = 0; l < d.layers; ++l) {
    auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
    DeepseekV3LayerWeights w;
    w.input_norm = s.vec(r, n("input_layernorm.weight"), p.dtype, {h});
    w.q_a_norm = s.vec(r, n("self_attn.q_a_layernorm.weight"), p.dtype, {d.q_lora_rank});
    w.kv_a_norm = s.vec(r, n("self_attn.kv_a_layernorm.weight"), p.dtype, {d.kv_lora_rank});
    w.qkv_a = bf16(n("self_attn.fused_qkv_a_proj_with_mqa.weight"), m.a_rows, h);
    w.q_b = bf16(n("self_attn.q_b_proj.weight"), m.q_rows, d.q_lora_rank);
    w.kv_b = bf16(n("self_attn.kv_b_proj.weight"), m.kv_rows, d.kv_lora_rank);
    w.o = bf16(n("self_attn.o_proj.weight"), h, m.o_cols);
    // NVFP4 w13 = [up; gate] (FlashInfer CUTLASS), unquantized w13 = [gate; up].
    w.mlp = bind_sigmoid_family_mlp(p, s, r, l, widths, is_nvfp4, projection, experts);
    layers.push_back(w);
  }
  return layers;
}

std::vector<GptOssLayerWeights> bind_gpt_oss_rank(const ModelProfile& p, const RankStorages& s, int r) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, hd = d.head_dim, e = d.experts;
  const LlamaRankHeads heads = llama_rank_heads(d, s.tp(), r);
  const int64_t q_rows = heads.q_heads * hd, qkv_rows = q_rows + 2 * int64_t{heads.kv_heads} * hd;
  const RankSlice im = gpt_oss_expert_slice(p, s.tp(), r);
  const bool mxfp4 = p.quantization == kQuantMxfp4;
  std::vector<GptOssLayerWeights> layers;
  for (int l = 0; l < d.layers; ++l) {
    auto n = [l](std::string_view leaf) { return llama_layer_name(l, leaf); };
    GptOssLayerWeights w;
    w.input_norm = s.vec(r, n("input_layernorm.weight"), p.dtype, {h});
    w.post_norm = s.vec(r, n("post_attention_layernorm.weight"), p.dtype, {h});
    w.attn.heads = heads;
    w.attn.qkv = dense_linear(s.ref(r, n("self_attn.qkv_proj.weight")), qkv_rows, h);
    w.attn.qkv_bias = s.vec(r, n("self_attn.qkv_proj.bias"), p.dtype, {qkv_rows});
    w.attn.o = dense_linear(s.ref(r, n("self_attn.o_proj.weight")), h, q_rows);
    w.attn.sinks = s.vec(r, n("self_attn.sinks"), p.dtype, {heads.q_heads});
    w.o_bias = s.vec(r, n("self_attn.o_proj.bias"), p.dtype, {h});
    w.router = dense_linear(s.ref(r, n("mlp.router.weight")), e, h);
    w.router_bias = s.vec(r, n("mlp.router.bias"), p.dtype, {e});
    if (mxfp4) {
      w.w13 = mxfp4_linear(s.ref(r, n("mlp.experts.w13_weight")), s.ref(r, n("mlp.experts.w13_weight_scale")),
                           2 * im.length, h);
      w.w2 = mxfp4_linear(s.ref(r, n("mlp.experts.w2_weight")), s.ref(r, n("mlp.experts.w2_weight_scale")), h,
                          im.length);
    } else {  // BF16 [E, H, 2 I_r] and [E, I_r, H]: K-major (moe_layout.hpp)
      w.w13 = dense_kmajor_linear(s.ref(r, n("mlp.experts.w13_weight")), 2 * im.length, h);
      w.w2 = dense_kmajor_linear(s.ref(r, n("mlp.experts.w2_weight")), h, im.length);
    }
    w.w13_bias = s.vec(r, n("mlp.experts.w13_bias"), p.dtype, {e, 2 * im.padded});
    w.w2_bias = s.vec(r, n("mlp.experts.w2_bias"), p.dtype, {e, h});
    layers.push_back(w);
  }
  return layers;
}

}  // namespace wsb
