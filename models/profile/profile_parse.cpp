// Profile JSON schema (models/profiles/<id>.json). Top level:
//   id (string, [A-Za-z0-9._-]), family (string; "llama"), description (string), source (string: where the
//   dims come from, e.g. the upstream config.json URL), quantization (string; "none"), dtype (safetensors
//   spelling of unquantized weights: BF16/F16/F32), tiny (bool, optional, default false), notes (string,
//   optional), dims (object, keys per family).
// dims for "llama": layers, hidden, intermediate, heads, kv_heads, head_dim, vocab (integers), rope_theta,
//   rms_eps (numbers), tie_embeddings (bool, optional, default false).
// Later families extend by adding their family name, their dims keys (e.g. experts) and top-level keys of their
// quantization method; unknown keys are rejected so a misspelt key never silently takes a default.
#include <fmt/format.h>

#include <fstream>

#include "models/core/errors.hpp"
#include "models/profile/json_fields.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

bool id_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

ModelDims parse_llama_dims(const JsonFields& dims) {
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
  top.reject_unknown({"id", "family", "description", "source", "notes", "quantization", "dtype", "tiny", "dims"});
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
  if (p.family == kLlamaFamily) {
    if (p.quantization != "none")
      top.fail("quantization", fmt::format("'{}' is not supported by family llama (supported: none)", p.quantization));
    p.dims = parse_llama_dims(top.object("dims"));
  } else {
    top.fail("family", fmt::format("unsupported family '{}' (supported: llama)", p.family));
  }
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
