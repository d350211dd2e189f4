#pragma once
// A checkpoint directory: `model.safetensors.index.json` + shards, or a single `model.safetensors`
// (Hugging Face sharded-checkpoint convention: index = {"metadata": {"total_size": N, ...}, "weight_map": {...}}).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/checkpoint/safetensors.hpp"

namespace wsb {

inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

/// The index file. `metadata` holds string values (total_size is kept apart as a number; wsbench's publication
/// fields version/base_version/delta_encoding/... are strings here).
struct CheckpointIndex {
  std::map<std::string, std::string> metadata;
  uint64_t total_size = 0;
  std::map<std::string, std::string> weight_map;  ///< tensor name -> shard file name (relative)
};

/// Parses an index. Throws Error(Format) naming the file and field (missing weight_map, non-string entry,
/// shard path absolute or containing "..", metadata value not a string/number), Error(Missing/Io) if unreadable.
CheckpointIndex read_checkpoint_index(const std::filesystem::path& index_path);
/// Writes atomically (tmp + rename), pretty JSON, keys sorted.
void write_checkpoint_index(const std::filesystem::path& index_path, const CheckpointIndex& index);
/// Validates a shard path from an index: relative, no "..", no empty component. Throws Error(Format).
void check_shard_path(const std::filesystem::path& index_path, const std::string& shard);

/// Opens every shard of a checkpoint directory and cross-checks them with the index: each indexed tensor exists
/// in its shard, each shard tensor is indexed to that shard, shard paths stay inside the directory (symlinks
/// resolved). Throws Error naming the file/tensor.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::filesystem::path& dir);
  ~CheckpointReader();

  const std::filesystem::path& dir() const { return dir_; }
  /// Index as read (synthesized for a single-file checkpoint).
  const CheckpointIndex& index() const { return index_; }
  /// All tensor names, sorted.
  std::vector<std::string> tensor_names() const;
  bool contains(std::string_view name) const;
  /// Throws Error(Missing) naming directory and tensor.
  const SafetensorsEntry& entry(std::string_view name) const;
  std::span<const uint8_t> data(std::string_view name) const;
  /// The shard file that holds `name`.
  const SafetensorsFile& shard_of(std::string_view name) const;
  /// Shards in file-name order.
  std::vector<const SafetensorsFile*> shards() const;

 private:
  std::filesystem::path dir_;
  CheckpointIndex index_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;  // file name -> shard
  std::map<std::string, const SafetensorsFile*, std::less<>> tensor_shard_;
};

}  // namespace wsb
