// dims of the MoE families. Key names are wsbench's (shared with llama where the meaning is the same); the profile
// JSON's "source" maps them to the upstream config.json keys. Reading and checking are separate so that
// profile_from_hf_dir, which reads config.json keys, runs the same checks.
#include "models/profile/moe_dims.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Checks dims members and fails naming the field as the source spells it.
class DimCheck {
 public:
  DimCheck(const std::string& origin, const DimFieldName& name) : origin_(origin), name_(name) {}

  [[noreturn]] void fail(std::string_view key, std::string_view why) const {
    throw Error(ErrorKind::Format, fmt::format("{}: field '{}': {}", origin_, name_(key), why));
  }
  void positive(std::string_view key, int64_t v) const {
    if (v <= 0) fail(key, fmt::format("must be a positive integer, got {}", v));
  }
  void non_negative(std::string_view key, int64_t v) const {
    if (v < 0) fail(key, fmt::format("must be >= 0, got {}", v));
  }
  void positive_number(std::string_view key, double v) const {
    if (!(v > 0.0) || !std::isfinite(v)) fail(key, fmt::format("must be > 0, got {}", v));
  }
  void multiple_of(std::string_view key, int64_t value, int m, std::string_view why) const {
    if (value % m != 0) fail(key, fmt::format("{} is not a multiple of {} ({})", value, m, why));
  }

 private:
  const std::string& origin_;
  const DimFieldName& name_;
};

/// Sizes, vocabulary, RoPE base, RMSNorm epsilon, experts and top-k: every MoE family.
void check_common(const DimCheck& c, const ModelDims& d) {
  c.positive("layers", d.layers);
  c.positive("hidden", d.hidden);
  c.positive("heads", d.heads);
  c.positive("vocab", d.vocab);
  if (d.vocab < kByteVocab)
    c.fail("vocab", fmt::format("must be >= {} (the byte-level vocabulary), got {}", kByteVocab, d.vocab));
  c.positive_number("rope_theta", d.rope_theta);
  if (!(d.rms_eps > 0.0 && d.rms_eps < 1.0)) c.fail("rms_eps", fmt::format("must be in (0, 1), got {}", d.rms_eps));
  c.positive("experts", d.experts);
  c.positive("top_k", d.top_k);
  if (d.top_k > d.experts) c.fail("top_k", fmt::format("{} exceeds the {} routed experts", d.top_k, d.experts));
}

/// GQA heads as llama checks them: kv_heads divides heads, head_dim even (rotate_half pairs i with i + dim/2).
void check_gqa(const DimCheck& c, const ModelDims& d) {
  c.positive("kv_heads", d.kv_heads);
  c.positive("head_dim", d.head_dim);
  if (d.heads % d.kv_heads != 0)
    c.fail("kv_heads",
           fmt::format("{} does not divide the {} attention heads (GQA groups must be equal)", d.kv_heads, d.heads));
  if (d.head_dim % 2 != 0) c.fail("head_dim", fmt::format("must be even for RoPE, got {}", d.head_dim));
}

/// Shared by glm4_moe and deepseek_v3: dense first layers, shared experts, routing normalization and scaling.
void check_deepseek_style_moe(const DimCheck& c, const ModelDims& d) {
  c.positive("moe_intermediate", d.moe_intermediate);
  c.non_negative("shared_experts", d.shared_experts);
  c.non_negative("first_dense_layers", d.first_dense_layers);
  if (d.first_dense_layers > d.layers)
    c.fail("first_dense_layers", fmt::format("{} exceeds the {} layers", d.first_dense_layers, d.layers));
  c.positive("intermediate", d.intermediate);
  c.positive_number("routed_scaling_factor", d.routed_scaling_factor);
}

void check_rope_scaling(const DimCheck& c, const RopeScaling& s) {
  if (s.factor == 0.0) return;  // no scaling
  c.positive_number("rope_scaling.factor", s.factor);
  c.positive("rope_scaling.original_max_position_embeddings", s.original_max_position);
  c.positive_number("rope_scaling.beta_fast", s.beta_fast);
  c.positive_number("rope_scaling.beta_slow", s.beta_slow);
}

/// rope_scaling {"type": "yarn", factor, original_max_position_embeddings, beta_fast, beta_slow[, mscale,
/// mscale_all_dim, truncate]} (deepseek_v3 / gpt_oss configs; only YaRN is used by these models).
RopeScaling read_rope_scaling(const JsonFields& dims) {
  auto obj = dims.optional_object("rope_scaling");
  if (!obj) return {};
  obj->reject_unknown({"type", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                       "mscale_all_dim", "truncate"});
  const std::string type = obj->string("type");
  if (type != "yarn") obj->fail("type", fmt::format("'{}' is not supported (supported: yarn)", type));
  RopeScaling s;
  s.factor = obj->number("factor");
  if (s.factor == 0.0) obj->fail("factor", "must be > 0, got 0");
  s.original_max_position = obj->integer("original_max_position_embeddings");
  s.beta_fast = obj->number("beta_fast");
  s.beta_slow = obj->number("beta_slow");
  s.mscale = obj->optional_number("mscale").value_or(0.0);
  s.mscale_all_dim = obj->optional_number("mscale_all_dim").value_or(0.0);
  s.truncate = obj->optional_boolean("truncate").value_or(true);
  return s;
}

/// Reads the keys every MoE family shares.
void read_common(const JsonFields& f, ModelDims& d) {
  d.layers = f.integer("layers");
  d.hidden = f.integer("hidden");
  d.heads = f.integer("heads");
  d.vocab = f.integer("vocab");
  d.rope_theta = f.number("rope_theta");
  d.rms_eps = f.number("rms_eps");
  d.experts = f.integer("experts");
  d.top_k = f.integer("top_k");
}

void read_deepseek_style_moe(const JsonFields& f, ModelDims& d) {
  d.moe_intermediate = f.integer("moe_intermediate");
  d.shared_experts = f.integer("shared_experts");
  d.first_dense_layers = f.integer("first_dense_layers");
  d.intermediate = f.integer("intermediate");
  d.norm_topk_prob = f.optional_boolean("norm_topk_prob").value_or(false);
  d.routed_scaling_factor = f.optional_number("routed_scaling_factor").value_or(1.0);
}

}  // namespace

std::string profile_dim_field(std::string_view key) { return fmt::format("dims.{}", key); }

void validate_glm4_moe_dims(const ModelDims& d, std::string_view, const std::string& origin,
                            const DimFieldName& name) {
  const DimCheck c(origin, name);
  check_common(c, d);
  check_gqa(c, d);
  check_deepseek_style_moe(c, d);
  const double rotary = d.partial_rotary_factor * d.head_dim;
  // transformers' Glm4MoeRotaryEmbedding rotates int(head_dim * factor) dims, in pairs.
  if (!(d.partial_rotary_factor > 0.0 && d.partial_rotary_factor <= 1.0) || rotary != std::floor(rotary) ||
      static_cast<int>(rotary) % 2 != 0)
    c.fail("partial_rotary_factor",
           fmt::format("{} must be in (0, 1] and make head_dim * factor an even integer (head_dim {})",
                       d.partial_rotary_factor, d.head_dim));
}

void validate_deepseek_v3_dims(const ModelDims& d, std::string_view quantization, const std::string& origin,
                               const DimFieldName& name) {
  const DimCheck c(origin, name);
  check_common(c, d);
  check_deepseek_style_moe(c, d);
  c.positive("q_lora_rank", d.q_lora_rank);
  c.positive("kv_lora_rank", d.kv_lora_rank);
  c.positive("qk_nope_head_dim", d.qk_nope_head_dim);
  c.positive("qk_rope_head_dim", d.qk_rope_head_dim);
  c.positive("v_head_dim", d.v_head_dim);
  if (d.qk_rope_head_dim % 2 != 0)
    c.fail("qk_rope_head_dim", fmt::format("must be even for RoPE, got {}", d.qk_rope_head_dim));
  if (quantization == kQuantNvfp4) {
    // NVFP4 routed experts: K of w13 is hidden, K of w2 is moe_intermediate; both hold whole 16-element blocks.
    c.multiple_of("hidden", d.hidden, kNvfp4Block, "NVFP4 gate/up_proj K needs whole 16-element scale blocks");
    c.multiple_of("moe_intermediate", d.moe_intermediate, kNvfp4Block,
                  "NVFP4 down_proj K needs whole 16-element scale blocks");
  }
  check_rope_scaling(c, d.rope_scaling);
}

void validate_gpt_oss_dims(const ModelDims& d, std::string_view quantization, const std::string& origin,
                           const DimFieldName& name) {
  const DimCheck c(origin, name);
  check_common(c, d);
  check_gqa(c, d);
  c.positive("intermediate", d.intermediate);
  c.positive("sliding_window", d.sliding_window);
  c.positive_number("swiglu_limit", d.swiglu_limit);
  if (quantization == kQuantMxfp4) {
    c.multiple_of("hidden", d.hidden, kMxfp4Block, "MXFP4 gate_up_proj K needs whole 32-element blocks");
    c.multiple_of("intermediate", d.intermediate, kMxfp4Block, "MXFP4 down_proj K needs whole 32-element blocks");
  }
  check_rope_scaling(c, d.rope_scaling);
}

ModelDims parse_glm4_moe_dims(const JsonFields& dims, std::string_view quantization) {
  dims.reject_unknown({"layers", "hidden", "intermediate", "moe_intermediate", "experts", "shared_experts", "top_k",
                       "first_dense_layers", "heads", "kv_heads", "head_dim", "vocab", "rope_theta", "rms_eps",
                       "partial_rotary_factor", "attention_bias", "norm_topk_prob", "routed_scaling_factor"});
  ModelDims d;
  read_common(dims, d);
  d.kv_heads = dims.integer("kv_heads");
  d.head_dim = dims.integer("head_dim");
  read_deepseek_style_moe(dims, d);
  d.attention_bias = dims.optional_boolean("attention_bias").value_or(false);
  d.partial_rotary_factor = dims.number("partial_rotary_factor");
  validate_glm4_moe_dims(d, quantization, dims.origin(), profile_dim_field);
  return d;
}

ModelDims parse_deepseek_v3_dims(const JsonFields& dims, std::string_view quantization) {
  dims.reject_unknown({"layers",
                       "hidden",
                       "intermediate",
                       "moe_intermediate",
                       "experts",
                       "shared_experts",
                       "top_k",
                       "first_dense_layers",
                       "heads",
                       "q_lora_rank",
                       "kv_lora_rank",
                       "qk_nope_head_dim",
                       "qk_rope_head_dim",
                       "v_head_dim",
                       "vocab",
                       "rope_theta",
                       "rms_eps",
                       "norm_topk_prob",
                       "routed_scaling_factor",
                       "rope_scaling"});
  ModelDims d;
  read_common(dims, d);
  read_deepseek_style_moe(dims, d);
  d.q_lora_rank = dims.integer("q_lora_rank");
  d.kv_lora_rank = dims.integer("kv_lora_rank");
  d.qk_nope_head_dim = dims.integer("qk_nope_head_dim");
  d.qk_rope_head_dim = dims.integer("qk_rope_head_dim");
  d.v_head_dim = dims.integer("v_head_dim");
  d.rope_scaling = read_rope_scaling(dims);
  validate_deepseek_v3_dims(d, quantization, dims.origin(), profile_dim_field);
  return d;
}

ModelDims parse_gpt_oss_dims(const JsonFields& dims, std::string_view quantization) {
  dims.reject_unknown({"layers", "hidden", "intermediate", "experts", "top_k", "heads", "kv_heads", "head_dim", "vocab",
                       "rope_theta", "rms_eps", "sliding_window", "swiglu_limit", "rope_scaling"});
  ModelDims d;
  read_common(dims, d);
  d.kv_heads = dims.integer("kv_heads");
  d.head_dim = dims.integer("head_dim");
  d.intermediate = dims.integer("intermediate");
  d.attention_bias = true;  // gpt_oss q/k/v/o always carry a bias (modeling_gpt_oss.py, bias=True)
  d.sliding_window = dims.integer("sliding_window");
  d.swiglu_limit = dims.number("swiglu_limit");
  d.rope_scaling = read_rope_scaling(dims);
  validate_gpt_oss_dims(d, quantization, dims.origin(), profile_dim_field);
  return d;
}

}  // namespace wsb
