#pragma once
// Writes small Hugging Face checkpoint directories for the profile_from_hf_dir tests: config.json plus the
// tensors as one model.safetensors or as shards with model.safetensors.index.json, the layout save_pretrained
// writes.
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "tests/support/file_bytes.hpp"

namespace wsb::test {

/// Bytes of one tensor (spec.bytes() long).
using TensorBytes = std::function<std::vector<uint8_t>(const TensorSpec& spec)>;

/// Writes `config` (dumped with indent 2) as dir/config.json and `tensors` in order: into model.safetensors when
/// `shard_bytes` is 0, else into shards "model-0000i-of-0000n.safetensors" of at most `shard_bytes` tensor bytes
/// each (a larger tensor gets a shard alone) with the index. Bytes come from `bytes`, zeros when empty.
inline void write_hf_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config,
                                const std::vector<TensorSpec>& tensors, uint64_t shard_bytes,
                                const TensorBytes& bytes = {}) {
  std::filesystem::create_directories(dir);
  write_bytes(dir / "config.json", config.dump(2) + "\n");
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t in_shard = 0;
  for (const TensorSpec& t : tensors) {
    if (shard_bytes > 0 && in_shard > 0 && in_shard + t.bytes() > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += t.bytes();
  }
  CheckpointIndex index;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_bytes == 0
                                 ? std::string("model.safetensors")
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    std::vector<std::vector<uint8_t>> data;
    std::vector<TensorData> entries;
    data.reserve(shards[i].size());
    for (const TensorSpec& t : shards[i]) {
      data.push_back(bytes ? bytes(t) : std::vector<uint8_t>(t.bytes(), 0));
      entries.push_back(TensorData{t, data.back()});
      index.weight_map[t.name] = name;
      index.total_size += t.bytes();
    }
    write_safetensors(dir / name, entries, {{"format", "pt"}});
  }
  if (shard_bytes > 0) write_checkpoint_index(dir / kIndexFileName, index);
}

}  // namespace wsb::test
