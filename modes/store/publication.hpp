#pragma once
// Reading publications: manifest (model.safetensors.index.json metadata) + shards, with every consistency rule
// of the format checked before any byte is used.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "modes/codec/delta_codec.hpp"
#include "modes/store/store.hpp"

namespace wsb {

enum class PublicationKind { Full, Delta };

/// Index metadata of a publication: version and base_version are 6-digit strings; delta_encoding absent => FULL;
/// compression_format "zstd"; checksum_format "xxh3-128" (default when absent).
struct PublicationManifest {
  uint32_t version = 0;
  std::optional<uint32_t> base_version;
  PublicationKind kind = PublicationKind::Full;
  DeltaEncoding encoding = DeltaEncoding::Xor;
  std::string compression_format;
  std::string checksum_format = "xxh3-128";
};

/// An opened, validated publication. Construction throws wsb::Error: Missing (no such version), Format
/// (metadata field wrong, checksum not 32 hex chars, unknown checksum/compression format, delta tensor not a
/// 1-D U8), Mismatch (tensor names of header, checksum map and index disagree — each named), Truncated (a shard
/// shorter than declared: not yet published), Lineage (metadata version != directory version).
/// FULL shards carry checksums too (same `__metadata__` map), so seeding can be verified.
class Publication {
 public:
  Publication(const Store& store, uint32_t version);
  ~Publication();

  const PublicationManifest& manifest() const { return manifest_; }
  uint32_t version() const { return manifest_.version; }
  bool is_full() const { return manifest_.kind == PublicationKind::Full; }
  const std::filesystem::path& dir() const;
  /// Sorted tensor names.
  std::vector<std::string> tensor_names() const;
  bool contains(std::string_view name) const;
  /// FULL: the tensor bytes; DELTA: the compressed payload. Throws Error(Missing) naming the tensor.
  std::span<const uint8_t> payload(std::string_view name) const;
  /// FULL only: dtype/shape of the stored tensor.
  const SafetensorsEntry& entry(std::string_view name) const;
  /// Expected xxh3-128 hex of the target canonical bytes of `name`.
  const std::string& expected_checksum(std::string_view name) const;

 private:
  PublicationManifest manifest_;
  std::unique_ptr<CheckpointReader> reader_;
  std::map<std::string, std::string, std::less<>> checksums_;
};

/// Ordered publications that take the canonical checkpoint from version `from` to `to`.
struct UpdatePlan {
  uint32_t from = 0;
  uint32_t to = 0;
  std::vector<std::unique_ptr<Publication>> steps;  ///< DELTA publications from+1 .. to
  std::string plan_hash;  ///< SHA-256 hex over the ordered (version, tensor, payload checksum) fragment list
};

/// Plans a delta update. Throws Error(Missing) when `to` is not published, Error(Lineage) for a gap, a base
/// mismatch (naming both versions) or to <= from, Error(Format) when a step is FULL.
UpdatePlan plan_update(const Store& store, uint32_t from, uint32_t to);

}  // namespace wsb
