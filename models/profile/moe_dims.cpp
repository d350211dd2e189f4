// dims of the MoE families. Key names are wsbench's (shared with llama where the meaning is the same); the profile
// JSON's "source" maps them to the upstream config.json keys.
#include "models/profile/moe_dims.hpp"

#include <fmt/format.h>

#include <cmath>

#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Reads required integers/numbers and checks them, failing on the field concerned.
class DimReader {
 public:
  explicit DimReader(const JsonFields& f) : f_(f) {}

  int positive(std::string_view key) const {
    int v = f_.integer(key);
    if (v <= 0) f_.fail(key, fmt::format("must be a positive integer, got {}", v));
    return v;
  }
  int non_negative(std::string_view key) const {
    int v = f_.integer(key);
    if (v < 0) f_.fail(key, fmt::format("must be >= 0, got {}", v));
    return v;
  }
  double positive_number(std::string_view key) const {
    double v = f_.number(key);
    if (!(v > 0.0) || !std::isfinite(v)) f_.fail(key, fmt::format("must be > 0, got {}", v));
    return v;
  }
  void multiple_of(std::string_view key, int value, int m, std::string_view why) const {
    if (value % m != 0) f_.fail(key, fmt::format("{} is not a multiple of {} ({})", value, m, why));
  }
  [[noreturn]] void fail(std::string_view key, std::string_view why) const { f_.fail(key, why); }
  const JsonFields& fields() const { return f_; }

 private:
  const JsonFields& f_;
};

/// Keys every MoE family shares: sizes, vocabulary, RoPE base and RMSNorm epsilon, experts and top-k.
void read_common(const DimReader& r, ModelDims& d) {
  d.layers = r.positive("layers");
  d.hidden = r.positive("hidden");
  d.heads = r.positive("heads");
  d.vocab = r.positive("vocab");
  if (d.vocab < kByteVocab)
    r.fail("vocab", fmt::format("must be >= {} (the byte-level vocabulary), got {}", kByteVocab, d.vocab));
  d.rope_theta = r.positive_number("rope_theta");
  d.rms_eps = r.fields().number("rms_eps");
  if (!(d.rms_eps > 0.0 && d.rms_eps < 1.0)) r.fail("rms_eps", fmt::format("must be in (0, 1), got {}", d.rms_eps));
  d.experts = r.positive("experts");
  d.top_k = r.positive("top_k");
  if (d.top_k > d.experts) r.fail("top_k", fmt::format("{} exceeds the {} routed experts", d.top_k, d.experts));
}

/// GQA heads as llama checks them: kv_heads divides heads, head_dim even (rotate_half pairs i with i + dim/2).
void read_gqa(const DimReader& r, ModelDims& d) {
  d.kv_heads = r.positive("kv_heads");
  d.head_dim = r.positive("head_dim");
  if (d.heads % d.kv_heads != 0)
    r.fail("kv_heads",
           fmt::format("{} does not divide the {} attention heads (GQA groups must be equal)", d.kv_heads, d.heads));
  if (d.head_dim % 2 != 0) r.fail("head_dim", fmt::format("must be even for RoPE, got {}", d.head_dim));
}

/// Shared by glm4_moe and deepseek_v3: dense first layers, shared experts, routing normalization and scaling.
void read_deepseek_style_moe(const DimReader& r, ModelDims& d) {
  d.moe_intermediate = r.positive("moe_intermediate");
  d.shared_experts = r.non_negative("shared_experts");
  d.first_dense_layers = r.non_negative("first_dense_layers");
  if (d.first_dense_layers > d.layers)
    r.fail("first_dense_layers", fmt::format("{} exceeds the {} layers", d.first_dense_layers, d.layers));
  d.intermediate = r.positive("intermediate");
  d.norm_topk_prob = r.fields().optional_boolean("norm_topk_prob").value_or(false);
  d.routed_scaling_factor = r.fields().has("routed_scaling_factor") ? r.positive_number("routed_scaling_factor") : 1.0;
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
  DimReader r(*obj);
  RopeScaling s;
  s.factor = r.positive_number("factor");
  s.original_max_position = r.positive("original_max_position_embeddings");
  s.beta_fast = r.positive_number("beta_fast");
  s.beta_slow = r.positive_number("beta_slow");
  s.mscale = obj->optional_number("mscale").value_or(0.0);
  s.mscale_all_dim = obj->optional_number("mscale_all_dim").value_or(0.0);
  s.truncate = obj->optional_boolean("truncate").value_or(true);
  return s;
}

}  // namespace

ModelDims parse_glm4_moe_dims(const JsonFields& dims) {
  dims.reject_unknown({"layers", "hidden", "intermediate", "moe_intermediate", "experts", "shared_experts", "top_k",
                       "first_dense_layers", "heads", "kv_heads", "head_dim", "vocab", "rope_theta", "rms_eps",
                       "partial_rotary_factor", "attention_bias", "norm_topk_prob", "routed_scaling_factor"});
  DimReader r(dims);
  ModelDims d;
  read_common(r, d);
  read_gqa(r, d);
  read_deepseek_style_moe(r, d);
  d.attention_bias = dims.optional_boolean("attention_bias").value_or(false);
  d.partial_rotary_factor = dims.number("partial_rotary_factor");
  const double rotary = d.partial_rotary_factor * d.head_dim;
  // transformers' Glm4MoeRotaryEmbedding rotates int(head_dim * factor) dims, in pairs.
  if (!(d.partial_rotary_factor > 0.0 && d.partial_rotary_factor <= 1.0) || rotary != std::floor(rotary) ||
      static_cast<int>(rotary) % 2 != 0)
    r.fail("partial_rotary_factor",
           fmt::format("{} must be in (0, 1] and make head_dim * factor an even integer (head_dim {})",
                       d.partial_rotary_factor, d.head_dim));
  return d;
}

ModelDims parse_deepseek_v3_dims(const JsonFields& dims) {
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
  DimReader r(dims);
  ModelDims d;
  read_common(r, d);
  read_deepseek_style_moe(r, d);
  d.q_lora_rank = r.positive("q_lora_rank");
  d.kv_lora_rank = r.positive("kv_lora_rank");
  d.qk_nope_head_dim = r.positive("qk_nope_head_dim");
  d.qk_rope_head_dim = r.positive("qk_rope_head_dim");
  d.v_head_dim = r.positive("v_head_dim");
  if (d.qk_rope_head_dim % 2 != 0)
    r.fail("qk_rope_head_dim", fmt::format("must be even for RoPE, got {}", d.qk_rope_head_dim));
  // NVFP4 routed experts: K of w13 is hidden, K of w2 is moe_intermediate; both hold whole 16-element blocks.
  r.multiple_of("hidden", d.hidden, kNvfp4Block, "NVFP4 gate/up_proj K needs whole 16-element scale blocks");
  r.multiple_of("moe_intermediate", d.moe_intermediate, kNvfp4Block,
                "NVFP4 down_proj K needs whole 16-element scale blocks");
  d.rope_scaling = read_rope_scaling(dims);
  return d;
}

ModelDims parse_gpt_oss_dims(const JsonFields& dims) {
  dims.reject_unknown({"layers", "hidden", "intermediate", "experts", "top_k", "heads", "kv_heads", "head_dim", "vocab",
                       "rope_theta", "rms_eps", "sliding_window", "swiglu_limit", "rope_scaling"});
  DimReader r(dims);
  ModelDims d;
  read_common(r, d);
  read_gqa(r, d);
  d.intermediate = r.positive("intermediate");
  d.attention_bias = true;  // gpt_oss q/k/v/o always carry a bias (modeling_gpt_oss.py, bias=True)
  d.sliding_window = r.positive("sliding_window");
  d.swiglu_limit = r.positive_number("swiglu_limit");
  d.rope_scaling = read_rope_scaling(dims);
  return d;
}

void check_gpt_oss_mxfp4_dims(const JsonFields& dims, const ModelDims& d) {
  const DimReader r(dims);
  r.multiple_of("hidden", d.hidden, kMxfp4Block, "MXFP4 gate_up_proj K needs whole 32-element blocks");
  r.multiple_of("intermediate", d.intermediate, kMxfp4Block, "MXFP4 down_proj K needs whole 32-element blocks");
}

}  // namespace wsb
