#pragma once
// Consecutive checkpoints made from a real one: a copy of a Hugging Face directory whose tensors or config.json are
// then edited, so a test knows exactly which elements changed (or which field differs).
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/checkpoint/checkpoint.hpp"
#include "tests/support/file_bytes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb::test {

/// Copies every file of checkpoint directory `from` into a new directory `to`.
inline void copy_checkpoint(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  for (const auto& entry : std::filesystem::directory_iterator(from)) {
    if (entry.is_regular_file()) std::filesystem::copy_file(entry.path(), to / entry.path().filename());
  }
}

/// Rewrites the shard of `dir` holding `tensor`, letting `edit` change the tensor (its bytes, dtype, shape or name).
inline void edit_checkpoint_tensor(const std::filesystem::path& dir, const std::string& tensor,
                                   const std::function<void(EditableTensor&)>& edit) {
  const std::filesystem::path shard = CheckpointReader(dir).shard_of(tensor).path();
  rewrite_shard(shard, [&](std::vector<EditableTensor>& tensors, std::map<std::string, std::string>&) {
    for (auto& t : tensors) {
      if (t.spec.name == tensor) edit(t);
    }
  });
}

/// Flips bit 0 of the first byte of each listed element (element = dtype-size bytes) of `tensor` in `dir`.
inline void flip_elements(const std::filesystem::path& dir, const std::string& tensor, const std::vector<size_t>& elements) {
  edit_checkpoint_tensor(dir, tensor, [&](EditableTensor& t) {
    for (size_t e : elements) t.bytes.at(e * dtype_size(t.spec.dtype)) ^= 0x01;
  });
}

/// Edits `dir`/config.json as parsed JSON.
inline void edit_config(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json config = nlohmann::json::parse(read_bytes(dir / "config.json"));
  edit(config);
  write_bytes(dir / "config.json", config.dump(2));
}

}  // namespace wsb::test
