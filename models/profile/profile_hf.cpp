// Profile from a Hugging Face checkpoint directory. Key names and defaults follow transformers' LlamaConfig
// (configuration_llama.py): num_key_value_heads defaults to num_attention_heads, head_dim to
// hidden_size / num_attention_heads, rope_theta to 10000, rms_norm_eps to 1e-6, tie_word_embeddings to false.
// transformers >= 5 writes rope_theta inside "rope_parameters" and "dtype" instead of "torch_dtype".
#include <fmt/format.h>

#include <fstream>

#include "core/errors.hpp"
#include "models/profile/json_fields.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

DType hf_dtype(const JsonFields& cfg) {
  const char* key = cfg.has("dtype") ? "dtype" : "torch_dtype";
  std::string name = cfg.string(key);
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  if (name == "float32") return DType::F32;
  cfg.fail(key, fmt::format("'{}' is not a supported weight dtype (bfloat16, float16, float32)", name));
}

/// Rope type of rope_parameters (transformers >= 5) or rope_scaling (older); "default" when absent.
/// "llama3" (Llama 3.1) is accepted: the reference forward pass applies plain RoPE (see forward.hpp).
void check_rope_type(const JsonFields& cfg) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto rope = cfg.optional_object(key);
    if (!rope) continue;
    std::string type = rope->optional_string("rope_type").value_or(rope->optional_string("type").value_or("default"));
    if (type != "default" && type != "llama3")
      rope->fail("rope_type", fmt::format("unsupported rope type '{}' (supported: default, llama3)", type));
  }
}

double hf_rope_theta(const JsonFields& cfg) {
  if (auto theta = cfg.optional_number("rope_theta")) return *theta;
  if (auto rope = cfg.optional_object("rope_parameters"))
    if (auto theta = rope->optional_number("rope_theta")) return *theta;
  return 10000.0;
}

void require_false(const JsonFields& cfg, const char* key) {
  if (cfg.optional_boolean(key).value_or(false)) cfg.fail(key, "biases are not supported by family llama");
}

std::string dir_name(const std::filesystem::path& dir) {
  std::filesystem::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" normalizes to a trailing empty name
  return p.filename().string();
}

}  // namespace

ModelProfile profile_from_hf_dir(const std::filesystem::path& dir) {
  std::filesystem::path path = dir / "config.json";
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open Hugging Face config", path.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
  JsonFields cfg(j, path.string());
  std::string model_type = cfg.string("model_type");
  if (model_type != "llama")
    cfg.fail("model_type", fmt::format("'{}' is not supported (supported: llama)", model_type));
  if (auto act = cfg.optional_string("hidden_act"); act && *act != "silu")
    cfg.fail("hidden_act", fmt::format("'{}' is not supported (the llama MLP is SwiGLU: silu)", *act));
  require_false(cfg, "attention_bias");
  require_false(cfg, "mlp_bias");
  check_rope_type(cfg);

  ModelProfile p;
  p.family = std::string(kLlamaFamily);
  p.id = "hf:" + dir_name(dir);  // not a profile file id: the prefix keeps the two apart
  p.description = fmt::format("Hugging Face checkpoint {} (model_type llama)", dir.string());
  p.quantization = "none";
  p.dtype = hf_dtype(cfg);
  ModelDims& d = p.dims;
  d.layers = cfg.integer("num_hidden_layers");
  d.hidden = cfg.integer("hidden_size");
  d.intermediate = cfg.integer("intermediate_size");
  d.heads = cfg.integer("num_attention_heads");
  d.kv_heads = cfg.optional_integer("num_key_value_heads").value_or(d.heads);
  if (d.heads <= 0) cfg.fail("num_attention_heads", fmt::format("must be a positive integer, got {}", d.heads));
  d.head_dim = cfg.optional_integer("head_dim").value_or(d.hidden / d.heads);
  d.vocab = cfg.integer("vocab_size");
  d.rope_theta = hf_rope_theta(cfg);
  d.rms_eps = cfg.optional_number("rms_norm_eps").value_or(1e-6);
  d.tie_embeddings = cfg.optional_boolean("tie_word_embeddings").value_or(false);
  validate_llama_dims(
      d, path.string(),
      LlamaDimFieldNames{"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                         "num_key_value_heads", "head_dim", "vocab_size", "rope_theta", "rms_norm_eps"});
  p.tiny = false;
  p.hf_dir = dir;
  p.raw = std::move(j);
  return p;
}

}  // namespace wsb
