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
/// fields version/base_version/delta_encoding/... are strings here). Other numeric metadata (HF's
/// total_parameters) is kept as its JSON spelling, e.g. "125376", and written back as a string.
struct CheckpointIndex {
  std::map<std::string, std::string> metadata;
  uint64_t total_size = 0;
  std::map<std::string, std::string> weight_map;  ///< tensor name -> shard file name (relative)
};

/// Parses an index. Throws Error(Format) naming the file and field (invalid JSON/UTF-8, duplicate key, missing
/// weight_map, non-string entry, shard path rejected by check_shard_path, metadata value not a string/number,
/// total_size not a non-negative integer or decimal string), Error(Missing) if absent, Error(Io) if unreadable.
/// "metadata" may be absent (total_size 0); other top-level keys are ignored.
CheckpointIndex read_checkpoint_index(const std::filesystem::path& index_path);
/// Writes atomically (tmp + fsync + rename + directory fsync), pretty JSON (indent 2, trailing newline), keys
/// sorted, total_size inside "metadata". Throws Error(Format) for a bad shard path or a "total_size" key in
/// `metadata` (reserved), Error(Io) on write failure.
void write_checkpoint_index(const std::filesystem::path& index_path, const CheckpointIndex& index);
/// Validates a shard path from an index: non-empty, relative, no "..", no "." and no empty component (so each
/// shard has one spelling), no NUL. Throws Error(Format) naming the index file and the shard path.
void check_shard_path(const std::filesystem::path& index_path, const std::string& shard);
/// `dir`/`shard` once it is known to stay inside `dir` with symlinks resolved, so no byte outside the directory is
/// ever read. Throws Error naming the index file and the shard: Format (resolves outside `dir`), Missing (absent),
/// Io.
std::filesystem::path contained_shard_path(const std::filesystem::path& dir, const std::filesystem::path& index_path,
                                           const std::string& shard);

/// Opens every shard of a checkpoint directory and cross-checks them with the index: each indexed tensor exists
/// in its shard, each shard tensor is indexed to that shard, shard paths stay inside the directory (symlinks
/// resolved). The index wins when both it and model.safetensors exist. Throws Error naming the file/tensor:
/// Missing (no directory, neither file, shard file absent, indexed tensor absent from its shard), Format (bad
/// shard path, shard resolving outside the directory, shard tensor not indexed or indexed to another shard,
/// any SafetensorsFile format error), Truncated (a shard shorter than it declares), Io.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::filesystem::path& dir);
  ~CheckpointReader();

  const std::filesystem::path& dir() const { return dir_; }
  /// Index as read (synthesized for a single-file checkpoint: every tensor -> "model.safetensors", total_size =
  /// sum of tensor bytes, metadata empty).
  const CheckpointIndex& index() const { return index_; }
  /// All tensor names, sorted.
  std::vector<std::string> tensor_names() const;
  bool contains(std::string_view name) const;
  /// Throws Error(Missing) naming directory and tensor.
  const SafetensorsEntry& entry(std::string_view name) const;
  std::span<const uint8_t> data(std::string_view name) const;
  /// SafetensorsFile::release of the shard holding `name` (no-op for an unknown name).
  void release(std::string_view name) const;
  /// SafetensorsFile::prefetch of the shard holding `name` (no-op for an unknown name).
  void prefetch(std::string_view name) const;
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

/// The entry of `expected.name` in `checkpoint`, checked against the model's dtype and shape. Throws
/// Error(Missing) when absent, Error(Mismatch) "<origin>: tensor 'x' is F32 [2], the model expects BF16 [2]".
const SafetensorsEntry& expect_tensor(const CheckpointReader& checkpoint, const TensorSpec& expected,
                                      const std::string& origin);

}  // namespace wsb
