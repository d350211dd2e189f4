// Profile from a Hugging Face checkpoint directory (declared in profile.hpp): config.json's model_type picks the
// family reader (hf_family_dims.hpp), quantization_config the method (hf_quantization.hpp), and
// profile_from_hf_dir then checks the tensors (hf_checkpoint_check.hpp). The Kimi K2.5/K2.6 wrapper
// (KimiK25ForConditionalGeneration, model_type kimi_k25) holds the deepseek_v3 decoder's config as text_config and
// every decoder tensor under "language_model." (SGLang models/kimi_k25.py load_weights strips that prefix;
// configs/kimi_k25.py parses text_config as a DeepseekV3Config).
#include <fmt/format.h>

#include <fstream>

#include "core/errors.hpp"
#include "models/profile/hf_checkpoint_check.hpp"
#include "models/profile/hf_config_write.hpp"
#include "models/profile/hf_family_dims.hpp"
#include "models/profile/hf_quantization.hpp"
#include "models/profile/json_fields.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

constexpr std::string_view kKimiK25ModelType = "kimi_k25";
constexpr const char* kKimiTensorPrefix = "language_model.";

DType hf_dtype(const JsonFields& cfg) {
  const char* key = cfg.has("dtype") ? "dtype" : "torch_dtype";
  std::string name = cfg.string(key);
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  if (name == "float32") return DType::F32;
  cfg.fail(key, fmt::format("'{}' is not a supported weight dtype (bfloat16, float16, float32)", name));
}

std::string dir_name(const std::filesystem::path& dir) {
  std::filesystem::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" normalizes to a trailing empty name
  return p.filename().string();
}

nlohmann::json read_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open Hugging Face config", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

}  // namespace

ModelProfile profile_from_hf_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kHfConfigFileName;
  nlohmann::json j = read_config(path);
  const JsonFields top(j, path.string());
  const std::string model_type = top.string("model_type");
  ModelProfile p;
  // The decoder's config: the top level, or the Kimi wrapper's text_config.
  std::optional<JsonFields> text;
  if (model_type == kKimiK25ModelType) {
    text = top.object("text_config");
    const std::string inner = text->optional_string("model_type").value_or(std::string(kDeepseekV3Family));
    if (inner != kDeepseekV3Family)
      text->fail("model_type", fmt::format("'{}' is not supported (a kimi_k25 text_config is deepseek_v3)", inner));
    p.family = std::string(kDeepseekV3Family);
    p.tensor_prefix = kKimiTensorPrefix;
    if (top.optional_boolean("tie_word_embeddings").value_or(false))
      top.fail("tie_word_embeddings", "true is not supported (family deepseek_v3 stores lm_head.weight apart)");
  } else if (model_type == kLlamaFamily || model_type == kGlm4MoeFamily || model_type == kDeepseekV3Family ||
             model_type == kGptOssFamily) {
    text = top;
    p.family = model_type;
  } else {
    top.fail("model_type", fmt::format("'{}' is not supported (supported: llama, glm4_moe, deepseek_v3, kimi_k25, "
                                       "gpt_oss)",
                                       model_type));
  }
  // quantization_config sits at the top level (the Kimi wrapper may repeat it in text_config).
  std::optional<JsonFields> qc = top.optional_object("quantization_config");
  if (!qc && text->path() != top.path()) qc = text->optional_object("quantization_config");
  const HfQuantization q = read_hf_quantization(top, qc, p.family);
  p.quantization = q.method;
  p.dtype = text->has("dtype") || text->has("torch_dtype") ? hf_dtype(*text) : hf_dtype(top);
  if (p.family == kLlamaFamily) {
    p.dims = hf_llama_dims(*text);
  } else if (p.family == kGlm4MoeFamily) {
    p.dims = hf_glm4_moe_dims(*text, p.quantization);
  } else if (p.family == kDeepseekV3Family) {
    p.dims = hf_deepseek_v3_dims(*text, p.quantization);
  } else {
    p.dims = hf_gpt_oss_dims(*text, p.quantization);
  }
  if (p.family == kGlm4MoeFamily || p.family == kDeepseekV3Family) hf_mtp_layers(*text);  // checked here, used later
  p.id = "hf:" + dir_name(dir);  // not a profile file id: the prefix keeps the two apart
  p.description = q.method == kQuantNone
                      ? fmt::format("Hugging Face checkpoint {} (model_type {})", dir.string(), model_type)
                      : fmt::format("Hugging Face checkpoint {} (model_type {}, {})", dir.string(), model_type,
                                    q.description);
  p.tiny = false;
  p.hf_dir = dir;
  p.raw = std::move(j);
  return p;
}

ModelProfile profile_from_hf_dir(const std::filesystem::path& dir) {
  ModelProfile p = profile_from_hf_config(dir);
  check_hf_checkpoint(p);
  return p;
}

}  // namespace wsb
