// open_consecutive_checkpoints(): two checkpoints can only make a delta when they are the same model; every mismatch
// is found from config.json and the shard headers, before a byte of weights is read or written.
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "models/profile/hf_config_write.hpp"
#include "publisher/checkpoint_publisher.hpp"

namespace wsb {
namespace fs = std::filesystem;
namespace {

/// config.json keys that describe the run that saved a checkpoint, not the model: transformers writes them as it
/// likes (transformers >= 5 says "dtype" where older versions said "torch_dtype").
const std::set<std::string> kRunFields{"_name_or_path", "_commit_hash", "transformers_version", "use_cache", "dtype",
                                       "torch_dtype"};

nlohmann::json read_config(const fs::path& dir) {
  const fs::path path = dir / kHfConfigFileName;
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open Hugging Face config", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

std::string shown(const nlohmann::json* value) { return value ? value->dump() : std::string("absent"); }

/// The dotted path of the first field that differs (objects compared key by key, in key order), or "".
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix,
                             const nlohmann::json** va, const nlohmann::json** vb) {
  std::set<std::string> keys;
  for (const auto& [key, value] : a.items()) keys.insert(key);
  for (const auto& [key, value] : b.items()) keys.insert(key);
  for (const std::string& key : keys) {
    if (prefix.empty() && kRunFields.contains(key)) continue;
    const nlohmann::json* x = a.contains(key) ? &a.at(key) : nullptr;
    const nlohmann::json* y = b.contains(key) ? &b.at(key) : nullptr;
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (x && y && x->is_object() && y->is_object()) {
      if (std::string inner = first_difference(*x, *y, path, va, vb); !inner.empty()) return inner;
      continue;
    }
    if (!x || !y || *x != *y) {
      *va = x;
      *vb = y;
      return path;
    }
  }
  return "";
}

void check_same_config(const fs::path& dir0, const nlohmann::json& config0, const fs::path& dir,
                       const nlohmann::json& config) {
  const nlohmann::json* v0 = nullptr;
  const nlohmann::json* v = nullptr;
  std::string field;
  if (config0.value("model_type", nlohmann::json()) != config.value("model_type", nlohmann::json())) {
    field = "model_type";
    v0 = config0.contains(field) ? &config0.at(field) : nullptr;
    v = config.contains(field) ? &config.at(field) : nullptr;
  } else {
    field = first_difference(config0, config, "", &v0, &v);
  }
  if (field.empty()) return;
  throw Error(ErrorKind::Mismatch,
              fmt::format("{}: field '{}' is {} but {} has {}: consecutive checkpoints must be one architecture",
                          (dir / kHfConfigFileName).string(), field, shown(v), (dir0 / kHfConfigFileName).string(),
                          shown(v0)));
}

std::string describe(const SafetensorsEntry& e) {
  return fmt::format("{} {}", dtype_name(e.dtype), shape_string(e.shape));
}

void check_same_tensors(const CheckpointReader& first, const CheckpointReader& other) {
  const std::vector<std::string> a = first.tensor_names();
  const std::vector<std::string> b = other.tensor_names();
  for (const std::string& name : b) {
    if (!first.contains(name)) {
      throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' is not in {}", other.dir().string(), name,
                                                   first.dir().string()));
    }
  }
  for (const std::string& name : a) {
    if (!other.contains(name)) {
      throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' of {} is missing", other.dir().string(), name,
                                                   first.dir().string()));
    }
    const SafetensorsEntry& x = first.entry(name);
    const SafetensorsEntry& y = other.entry(name);
    if (x.dtype != y.dtype || x.shape != y.shape) {
      throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' is {}, {} has {}", other.dir().string(), name,
                                                   describe(y), first.dir().string(), describe(x)));
    }
  }
}

}  // namespace

ConsecutiveCheckpoints open_consecutive_checkpoints(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) throw Error(ErrorKind::Format, "no checkpoint directory given");
  ConsecutiveCheckpoints out;
  out.profile = profile_from_hf_dir(dirs[0]);
  const nlohmann::json config0 = read_config(dirs[0]);
  const std::vector<TensorSpec> tensors = out.profile.canonical_tensors();
  for (size_t k = 0; k < dirs.size(); ++k) {
    if (k > 0) {
      profile_from_hf_dir(dirs[k]);  // its own config errors first, named by its own file
      check_same_config(dirs[0], config0, dirs[k], read_config(dirs[k]));
    }
    auto reader = std::make_unique<CheckpointReader>(dirs[k]);
    for (const TensorSpec& tensor : tensors) expect_tensor(*reader, tensor, dirs[k].string());
    if (k > 0) check_same_tensors(*out.readers[0], *reader);
    out.readers.push_back(std::move(reader));
  }
  return out;
}

}  // namespace wsb
