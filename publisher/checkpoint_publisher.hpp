#pragma once
// Publications from real consecutive checkpoints (Hugging Face directories a trainer saved one step apart): FULL v0
// from the first, one DELTA per following directory, so a run measures the deltas a real training run produces.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "models/profile/profile.hpp"
#include "publication/delta_codec.hpp"
#include "publisher/publisher.hpp"

namespace wsb {

struct CheckpointPublishOptions {
  std::filesystem::path store;
  /// The DELTAs' encoding; nullopt = automatic: per publication (the format records one delta_encoding per
  /// publication, so it cannot vary per tensor), the encoding whose payloads sum to fewer bytes, xor on a tie.
  std::optional<DeltaEncoding> encoding = DeltaEncoding::Xor;
  int zstd_level = 1;
  uint64_t max_shard_bytes = 2ull << 30;  ///< shard split threshold (bytes of stored data)
  bool fsync = false;
  bool advance_latest = true;
  /// Worker threads that compare and compress tensors (written in checkpoint order; the bytes are the same for any
  /// count). Each holds about one tensor of each checkpoint plus its payloads.
  int threads = 1;
};

/// Consecutive checkpoints of one model, opened and checked against each other.
struct ConsecutiveCheckpoints {
  ModelProfile profile;  ///< profile_from_hf_dir of the first directory
  std::vector<std::unique_ptr<CheckpointReader>> readers;  ///< one per directory, in order
};

/// Opens `dirs` (at least one) and checks, reading headers and config.json only, that they are checkpoints of the
/// same architecture holding the same tensors. Throws, naming the directory and the field or tensor:
/// profile_from_hf_dir's errors for each directory (unsupported model_type, bad config.json); Error(Mismatch)
/// "<dir>/config.json: field '<key>' is <v> but <dir0>/config.json has <v0>" for the first config.json field that
/// differs from the first directory's, model_type first, nested objects by dotted path (fields that describe the
/// saving run, not the architecture, are not compared: _name_or_path, _commit_hash, transformers_version, use_cache,
/// dtype, torch_dtype; a dtype change shows as the tensors' dtypes); expect_tensor's Error(Missing) / Error(Mismatch)
/// for a tensor of the profile that a directory lacks or holds with another dtype or shape; Error(Mismatch) naming
/// the first tensor one directory has and the first does not (or the reverse), or holds with another dtype or shape;
/// CheckpointReader's errors (missing shard, an index naming a tensor no shard holds); Error(Format) for no
/// directory.
ConsecutiveCheckpoints open_consecutive_checkpoints(const std::vector<std::filesystem::path>& dirs);

/// Publishes `dirs` (open_consecutive_checkpoints first: nothing is written when they do not match) into an empty
/// range of the store: version 0 FULL with dirs[0]'s tensors (the profile's canonical tensors, byte for byte) and
/// config.json (hf_config_text: dirs[0]'s own), then version k DELTA (base k - 1) from dirs[k - 1] to dirs[k], every
/// tensor encoded even when unchanged (every storage is prepared on every update), checksums of dirs[k]'s bytes.
/// Streams: one tensor of each of two checkpoints at a time (their mapped pages are released after use), the
/// payloads spilled to an unnamed temporary file in the store's updates folder until the version is complete and its
/// shards are written; every publication is renamed into place after all of them are complete, in version order, then
/// `latest` moves to the last (options.advance_latest). Returns one PublicationStats per version: changed elements
/// per change_class (FULL: 0 changed), payload bytes per encoding tried, the encoding used, stored bytes (shard files),
/// source directory, seconds.
/// Throws open_consecutive_checkpoints' errors; Error(Lineage) when a version 0..dirs.size()-1 is already published;
/// Error(Format) for more than 256 directories; Error(Io) on a write failure (then nothing becomes visible).
std::vector<PublicationStats> publish_from_checkpoints(const std::vector<std::filesystem::path>& dirs,
                                                       const CheckpointPublishOptions& options);

}  // namespace wsb
