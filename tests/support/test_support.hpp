#pragma once
// Shared helpers of the test suites: temporary folders, a published tiny store, editing publications in place to
// build bad inputs, and the checks of thrown errors (error_checks.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "models/checkpoint/checkpoint.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "core/errors.hpp"
#include "core/sync_options.hpp"
#include "models/profile/profile.hpp"
#include "publisher/publisher.hpp"
#include "publication/store.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb::test {

/// A fresh folder under the system temp dir, removed at scope end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("wsbench-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// A tiny CI profile by id (models/profiles/<id>.json): llama-tiny-bf16 by default; glm-tiny-fp8,
/// kimi-tiny-nvfp4 and gpt-oss-tiny-mxfp4 for the quantized MoE families, gpt-oss-tiny-bf16 for gpt_oss with BF16
/// experts.
/// The sync options of mode `name` ("disk", "cpu", "refit") with every setting at its default.
inline SyncOptions sync_of(std::string_view name) { return SyncOptions{parse_sync_mode(name)}; }

inline ModelProfile tiny_profile(const std::string& id = "llama-tiny-bf16") {
  return find_profile(id, WSBENCH_PROFILES_DIR);
}

/// Publishes FULL v0 and DELTA v1..last of tiny profile `profile_id` into `store`.
inline void publish_tiny(const std::filesystem::path& store, uint32_t last = 3, uint64_t seed = 7,
                         DeltaEncoding encoding = DeltaEncoding::Xor,
                         const std::string& profile_id = "llama-tiny-bf16") {
  PublishOptions options;
  options.store = store;
  options.first_version = 0;
  options.last_version = last;
  options.seed = seed;
  options.encoding = encoding;
  publish(tiny_profile(profile_id), options);
}

/// One tensor of a shard being edited.
struct EditableTensor {
  TensorSpec spec;
  std::vector<uint8_t> bytes;
};

/// Reads every tensor and the metadata of a safetensors file, lets `edit` change them, writes the file back.
inline void rewrite_shard(const std::filesystem::path& path,
                          const std::function<void(std::vector<EditableTensor>&, std::map<std::string, std::string>&)>& edit) {
  std::vector<EditableTensor> tensors;
  std::map<std::string, std::string> metadata;
  {
    SafetensorsFile file(path);
    metadata = file.metadata();
    for (const auto& e : file.entries()) {
      auto d = file.data(e);
      tensors.push_back({e.spec(), std::vector<uint8_t>(d.begin(), d.end())});
    }
  }
  edit(tensors, metadata);
  std::vector<TensorData> data;
  for (const auto& t : tensors) data.push_back({t.spec, t.bytes});
  write_safetensors(path, data, metadata);
}

/// Path of the shard of publication `version` that holds `tensor`.
inline std::filesystem::path shard_of(const std::filesystem::path& store, uint32_t version, const std::string& tensor) {
  const auto dir = Store(store).update_dir(version);
  const auto index = read_checkpoint_index(dir / kIndexFileName);
  return dir / index.weight_map.at(tensor);
}

}  // namespace wsb::test
