// Canonical tensor lists of the MoE families (declared in moe_tensors.hpp). Order: embed_tokens; per layer
// input_layernorm, attention, post_attention_layernorm, MLP; model.norm; lm_head. Within a quantized linear:
// weight, weight_scale[, weight_scale_2, input_scale]. Within a MoE MLP: router, routed experts 0..E-1 (gate, up,
// down), shared experts.
#include "models/profile/moe_tensors.hpp"

#include <fmt/format.h>

#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

using Tensors = std::vector<TensorSpec>;

/// Appends the tensors of one linear layer [out, in] named `base` ("...q_proj") in the given method.
void linear(Tensors& t, const std::string& base, std::string_view method, DType dtype, int64_t out, int64_t in) {
  if (method == kQuantFp8Channel) {
    // compressed-tensors channel FP8 (llm-compressor): e4m3 codes and one F32 scale per output row.
    t.push_back({base + ".weight", DType::F8_E4M3, {out, in}});
    t.push_back({base + ".weight_scale", DType::F32, {out, 1}});
  } else if (method == kQuantNvfp4) {
    // ModelOpt NVFP4 (hf_quant_config quant_algo NVFP4, group_size 16): scalars are shape [].
    t.push_back({base + ".weight", DType::U8, {out, in / 2}});
    t.push_back({base + ".weight_scale", DType::F8_E4M3, {out, in / kNvfp4Block}});
    t.push_back({base + ".weight_scale_2", DType::F32, {}});
    t.push_back({base + ".input_scale", DType::F32, {}});
  } else {
    t.push_back({base + ".weight", dtype, {out, in}});
  }
}

/// gate_proj, up_proj [inter, hidden] and down_proj [hidden, inter] under `base` ("...mlp" or "...experts.3").
void mlp(Tensors& t, const std::string& base, std::string_view method, DType dtype, int64_t hidden, int64_t inter) {
  linear(t, base + ".gate_proj", method, dtype, inter, hidden);
  linear(t, base + ".up_proj", method, dtype, inter, hidden);
  linear(t, base + ".down_proj", method, dtype, hidden, inter);
}

/// Router of glm4_moe / deepseek_v3: BF16 gate (never quantized: compressed-tensors ignore list / ModelOpt keeps
/// routers) and the F32 e_score_correction_bias of noaux_tc routing (DeepSeek-V3 and GLM-4.5 checkpoints store it
/// as float32).
void sigmoid_router(Tensors& t, const std::string& mlp_base, DType dtype, const ModelDims& d) {
  t.push_back({mlp_base + ".gate.weight", dtype, {d.experts, d.hidden}});
  t.push_back({mlp_base + ".gate.e_score_correction_bias", DType::F32, {d.experts}});
}

std::string layer(int i, std::string_view leaf) { return llama_layer_name(i, leaf); }

}  // namespace

std::vector<TensorSpec> glm4_moe_tensors(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, q = int64_t{d.heads} * d.head_dim, kv = int64_t{d.kv_heads} * d.head_dim;
  const std::string_view m = p.quantization;  // fp8-channel: every Linear but lm_head and mlp.gate
  Tensors t;
  t.push_back({"model.embed_tokens.weight", p.dtype, {d.vocab, h}});
  for (int i = 0; i < d.layers; ++i) {
    t.push_back({layer(i, "input_layernorm.weight"), p.dtype, {h}});
    for (auto [proj, rows] : {std::pair{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
      const std::string base = layer(i, fmt::format("self_attn.{}", proj));
      linear(t, base, m, p.dtype, rows, h);
      if (d.attention_bias) t.push_back({base + ".bias", p.dtype, {rows}});
    }
    linear(t, layer(i, "self_attn.o_proj"), m, p.dtype, h, q);
    t.push_back({layer(i, "post_attention_layernorm.weight"), p.dtype, {h}});
    if (!is_moe_layer(d, i)) {
      mlp(t, layer(i, "mlp"), m, p.dtype, h, d.intermediate);
      continue;
    }
    sigmoid_router(t, layer(i, "mlp"), p.dtype, d);
    for (int e = 0; e < d.experts; ++e)
      mlp(t, layer(i, fmt::format("mlp.experts.{}", e)), m, p.dtype, h, d.moe_intermediate);
    if (d.shared_experts > 0) mlp(t, layer(i, "mlp.shared_experts"), m, p.dtype, h, shared_intermediate(d));
  }
  t.push_back({"model.norm.weight", p.dtype, {h}});
  t.push_back({"lm_head.weight", p.dtype, {d.vocab, h}});
  return t;
}

std::vector<TensorSpec> deepseek_v3_tensors(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, heads = d.heads;
  const std::string& pre = p.tensor_prefix;
  auto n = [&](int i, std::string_view leaf) { return pre + layer(i, leaf); };
  const std::string_view bf16 = kQuantNone;  // nvfp4: routed experts only; attention, shared, dense stay BF16
  Tensors t;
  t.push_back({pre + "model.embed_tokens.weight", p.dtype, {d.vocab, h}});
  for (int i = 0; i < d.layers; ++i) {
    t.push_back({n(i, "input_layernorm.weight"), p.dtype, {h}});
    t.push_back({n(i, "self_attn.q_a_proj.weight"), p.dtype, {d.q_lora_rank, h}});
    t.push_back({n(i, "self_attn.q_a_layernorm.weight"), p.dtype, {d.q_lora_rank}});
    t.push_back({n(i, "self_attn.q_b_proj.weight"), p.dtype, {heads * mla_qk_head_dim(d), d.q_lora_rank}});
    t.push_back({n(i, "self_attn.kv_a_proj_with_mqa.weight"), p.dtype, {d.kv_lora_rank + d.qk_rope_head_dim, h}});
    t.push_back({n(i, "self_attn.kv_a_layernorm.weight"), p.dtype, {d.kv_lora_rank}});
    t.push_back(
        {n(i, "self_attn.kv_b_proj.weight"), p.dtype, {heads * (d.qk_nope_head_dim + d.v_head_dim), d.kv_lora_rank}});
    t.push_back({n(i, "self_attn.o_proj.weight"), p.dtype, {h, heads * d.v_head_dim}});
    t.push_back({n(i, "post_attention_layernorm.weight"), p.dtype, {h}});
    if (!is_moe_layer(d, i)) {
      mlp(t, n(i, "mlp"), bf16, p.dtype, h, d.intermediate);
      continue;
    }
    sigmoid_router(t, n(i, "mlp"), p.dtype, d);
    for (int e = 0; e < d.experts; ++e)
      mlp(t, n(i, fmt::format("mlp.experts.{}", e)), p.quantization, p.dtype, h, d.moe_intermediate);
    if (d.shared_experts > 0) mlp(t, n(i, "mlp.shared_experts"), bf16, p.dtype, h, shared_intermediate(d));
  }
  t.push_back({pre + "model.norm.weight", p.dtype, {h}});
  t.push_back({pre + "lm_head.weight", p.dtype, {d.vocab, h}});
  return t;
}

std::vector<TensorSpec> gpt_oss_tensors(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, q = int64_t{d.heads} * d.head_dim, kv = int64_t{d.kv_heads} * d.head_dim;
  const int64_t e = d.experts, inter = d.intermediate;
  const bool mxfp4 = p.quantization == kQuantMxfp4;
  Tensors t;
  t.push_back({"model.embed_tokens.weight", p.dtype, {d.vocab, h}});
  for (int i = 0; i < d.layers; ++i) {
    t.push_back({layer(i, "input_layernorm.weight"), p.dtype, {h}});
    for (auto [proj, rows] : {std::pair{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
      t.push_back({layer(i, fmt::format("self_attn.{}.weight", proj)), p.dtype, {rows, h}});
      t.push_back({layer(i, fmt::format("self_attn.{}.bias", proj)), p.dtype, {rows}});
    }
    t.push_back({layer(i, "self_attn.o_proj.weight"), p.dtype, {h, q}});
    t.push_back({layer(i, "self_attn.o_proj.bias"), p.dtype, {h}});
    t.push_back({layer(i, "self_attn.sinks"), p.dtype, {d.heads}});  // BF16 [heads] in openai/gpt-oss-*
    t.push_back({layer(i, "post_attention_layernorm.weight"), p.dtype, {h}});
    t.push_back({layer(i, "mlp.router.weight"), p.dtype, {e, h}});
    t.push_back({layer(i, "mlp.router.bias"), p.dtype, {e}});
    if (mxfp4) {
      const int64_t hb = h / kMxfp4Block, ib = inter / kMxfp4Block;
      t.push_back({layer(i, "mlp.experts.gate_up_proj_blocks"), DType::U8, {e, 2 * inter, hb, 16}});
      t.push_back({layer(i, "mlp.experts.gate_up_proj_scales"), DType::U8, {e, 2 * inter, hb}});
      t.push_back({layer(i, "mlp.experts.gate_up_proj_bias"), p.dtype, {e, 2 * inter}});
      t.push_back({layer(i, "mlp.experts.down_proj_blocks"), DType::U8, {e, h, ib, 16}});
      t.push_back({layer(i, "mlp.experts.down_proj_scales"), DType::U8, {e, h, ib}});
      t.push_back({layer(i, "mlp.experts.down_proj_bias"), p.dtype, {e, h}});
    } else {
      // transformers GptOssExperts parameters as save_pretrained writes them: [E, in, out] (x @ W), gate/up
      // interleaved along the last dim of gate_up_proj.
      t.push_back({layer(i, "mlp.experts.gate_up_proj"), p.dtype, {e, h, 2 * inter}});
      t.push_back({layer(i, "mlp.experts.gate_up_proj_bias"), p.dtype, {e, 2 * inter}});
      t.push_back({layer(i, "mlp.experts.down_proj"), p.dtype, {e, inter, h}});
      t.push_back({layer(i, "mlp.experts.down_proj_bias"), p.dtype, {e, h}});
    }
  }
  t.push_back({"model.norm.weight", p.dtype, {h}});
  t.push_back({"lm_head.weight", p.dtype, {d.vocab, h}});
  return t;
}

}  // namespace wsb
