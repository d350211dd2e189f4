// Profile JSON schema (models/profiles/<id>.json). Top level:
//   id (string, [A-Za-z0-9._-]), family (string: llama, glm4_moe, deepseek_v3, gpt_oss), description (string),
//   source (string: where the dims come from, e.g. the upstream config.json URL), quantization (string, a method
//   of the family: models/profile/family_quantization.hpp), dtype (safetensors spelling of
//   unquantized weights: BF16/F16/F32), tiny (bool, optional, default false), notes (string, optional),
//   tensor_prefix (string, optional, deepseek_v3 only: prefix of every canonical tensor name), dims (object, keys
//   per family).
// dims for "llama": layers, hidden, intermediate, heads, kv_heads, head_dim, vocab (integers), rope_theta,
//   rms_eps (numbers), tie_embeddings (bool, optional, default false).
// dims for "glm4_moe": layers, hidden, intermediate, moe_intermediate, experts, shared_experts, top_k,
//   first_dense_layers, heads, kv_heads, head_dim, vocab, rope_theta, rms_eps, partial_rotary_factor,
//   attention_bias, norm_topk_prob (optional, false), routed_scaling_factor (optional, 1.0).
// dims for "deepseek_v3": layers, hidden, intermediate, moe_intermediate, experts, shared_experts, top_k,
//   first_dense_layers, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, vocab,
//   rope_theta, rms_eps, norm_topk_prob, routed_scaling_factor, rope_scaling (optional object, models/profile/
//   moe_dims.cpp).
// dims for "gpt_oss": layers, hidden, intermediate, experts, top_k, heads, kv_heads, head_dim, vocab, rope_theta,
//   rms_eps, sliding_window, swiglu_limit, rope_scaling (optional object).
// Unknown keys are rejected so a misspelt key never silently takes a default.
#include <fmt/format.h>

#include <fstream>

#include "core/errors.hpp"
#include "models/profile/family_quantization.hpp"
#include "models/profile/json_fields.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_dims.hpp"
#include "models/profile/moe_family.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

bool id_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

ModelDims parse_llama_dims(const JsonFields& dims, std::string_view) {
  dims.reject_unknown({"layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab", "rope_theta",
                       "rms_eps", "tie_embeddings"});
  ModelDims d;
  d.layers = dims.integer("layers");
  d.hidden = dims.integer("hidden");
  d.intermediate = dims.integer("intermediate");
  d.heads = dims.integer("heads");
  d.kv_heads = dims.integer("kv_heads");
  d.head_dim = dims.integer("head_dim");
  d.vocab = dims.integer("vocab");
  d.rope_theta = dims.number("rope_theta");
  d.rms_eps = dims.number("rms_eps");
  d.tie_embeddings = dims.optional_boolean("tie_embeddings").value_or(false);
  validate_llama_dims(d, dims.origin(), LlamaDimFieldNames{});
  if (d.vocab < kByteVocab)
    dims.fail("vocab", fmt::format("must be >= {} (the byte-level vocabulary), got {}", kByteVocab, d.vocab));
  return d;
}

}  // namespace

ModelProfile parse_profile(const nlohmann::json& j, const std::string& origin) {
  JsonFields top(j, origin);
  top.reject_unknown(
      {"id", "family", "description", "source", "notes", "quantization", "dtype", "tiny", "tensor_prefix", "dims"});
  ModelProfile p;
  p.id = top.string("id");
  for (char c : p.id)
    if (!id_char_ok(c)) top.fail("id", fmt::format("'{}' may use only letters, digits, '.', '_' and '-'", p.id));
  p.family = top.string("family");
  p.description = top.string("description");
  top.string("source");  // required: every profile cites where its dims come from
  top.optional_string("notes");
  p.quantization = top.string("quantization");
  std::string dtype = top.string("dtype");
  auto parsed = parse_dtype(dtype);
  if (!parsed || !(*parsed == DType::BF16 || *parsed == DType::F16 || *parsed == DType::F32))
    top.fail("dtype", fmt::format("'{}' is not an unquantized weight dtype (BF16, F16, F32)", dtype));
  p.dtype = *parsed;
  p.tiny = top.optional_boolean("tiny").value_or(false);
  struct FamilyRule {
    std::string_view family;
    ModelDims (*parse)(const JsonFields&, std::string_view quantization);
  };
  static const FamilyRule kRules[] = {{kLlamaFamily, parse_llama_dims},
                                      {kGlm4MoeFamily, parse_glm4_moe_dims},
                                      {kDeepseekV3Family, parse_deepseek_v3_dims},
                                      {kGptOssFamily, parse_gpt_oss_dims}};
  const FamilyRule* rule = nullptr;
  for (const FamilyRule& r : kRules)
    if (r.family == p.family) rule = &r;
  if (rule == nullptr)
    top.fail("family",
             fmt::format("unsupported family '{}' (supported: llama, glm4_moe, deepseek_v3, gpt_oss)", p.family));
  if (!family_supports_quantization(p.family, p.quantization))
    top.fail("quantization", fmt::format("'{}' is not supported by family {} (supported: {})", p.quantization, p.family,
                                         family_quantization_list(p.family)));
  if (auto prefix = top.optional_string("tensor_prefix")) {
    if (p.family != kDeepseekV3Family)
      top.fail("tensor_prefix", fmt::format("only family deepseek_v3 takes a tensor prefix, not {}", p.family));
    if (prefix->empty() || prefix->back() != '.')
      top.fail("tensor_prefix", fmt::format("'{}' must be non-empty and end with '.'", *prefix));
    p.tensor_prefix = *prefix;
  }
  p.dims = rule->parse(top.object("dims"), p.quantization);
  p.raw = j;
  return p;
}

ModelProfile load_profile(const std::filesystem::path& json_path) {
  std::ifstream in(json_path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open profile", json_path.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, fmt::format("{}: invalid JSON: {}", json_path.string(), e.what()));
  }
  return parse_profile(j, json_path.string());
}

}  // namespace wsb
