#pragma once
// Reading publications: manifest (model.safetensors.index.json metadata) + shards, with every consistency rule
// of the format checked before any byte is used.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "publication/delta_codec.hpp"
#include "publication/store.hpp"
#include "publication/tensor_checksum.hpp"

namespace wsb {

enum class PublicationKind { Full, Delta };

/// Index metadata of a publication: version and base_version are 6-digit strings; delta_encoding absent => FULL;
/// compression_format "zstd" (one frame per payload) or "zstd-frames" (one or more: delta_codec.hpp);
/// checksum_format "xxh3-128" (default when absent) or "xxh3-128-ranges" with checksum_range_bytes
/// (publication/tensor_checksum.hpp).
struct PublicationManifest {
  uint32_t version = 0;
  std::optional<uint32_t> base_version;
  PublicationKind kind = PublicationKind::Full;
  DeltaEncoding encoding = DeltaEncoding::Xor;
  std::string compression_format;
  PayloadFraming framing = PayloadFraming::OneFrame;  ///< what compression_format says
  std::string checksum_format = "xxh3-128";
  /// "xxh3-128-ranges": bytes per checksummed range (a multiple of 1 MiB); 0 under "xxh3-128".
  uint64_t checksum_range_bytes = 0;
};

/// The manifest of DELTA `version` (>= 1) on base `version` - 1: `encoding`, compression_format named from
/// `framing` ("zstd" or "zstd-frames"), and checksum_format "xxh3-128" (checksum_range_bytes 0) or
/// "xxh3-128-ranges".
PublicationManifest delta_manifest(uint32_t version, DeltaEncoding encoding,
                                   PayloadFraming framing = PayloadFraming::OneFrame,
                                   uint64_t checksum_range_bytes = 0);

/// Checks index metadata against the rules above and returns the manifest. `origin` names the index file in
/// errors. Throws Error(Format) naming the field: 'version' missing or not 6 digits, 'delta_encoding' not
/// xor/overwrite, 'base_version' missing on a DELTA or not 6 digits, 'compression_format' missing on a DELTA or
/// neither "zstd" nor "zstd-frames", 'checksum_format' neither "xxh3-128" nor "xxh3-128-ranges",
/// 'checksum_range_bytes' missing under "xxh3-128-ranges", present under "xxh3-128", not a decimal multiple of 1 MiB.
PublicationManifest parse_manifest(const CheckpointIndex& index, const std::string& origin);

/// Index metadata strings of `manifest` (version, base_version when set, delta_encoding and compression_format
/// for a DELTA, checksum_format, checksum_range_bytes when ranged); total_size is set by the writer.
std::map<std::string, std::string> manifest_metadata(const PublicationManifest& manifest);

/// True for exactly 32 lowercase hex characters: the form wsb::xxh3_128_hex produces.
bool is_xxh3_128_hex(std::string_view text);

/// Shard file name of the Hugging Face sharded-checkpoint convention, 1-based: (1, 4) ->
/// "model-00001-of-00004.safetensors".
std::string shard_file_name(size_t index, size_t count);

/// Groups consecutive tensors of `bytes` (stored bytes each) into shards: a shard is closed before the tensor
/// that would take it beyond `max_shard_bytes` (a larger tensor gets a shard of its own). Returns [begin, end)
/// ranges of tensor indices, in order; empty input -> no shard.
std::vector<std::pair<size_t, size_t>> split_shards(std::span<const uint64_t> bytes, uint64_t max_shard_bytes);

/// Writes one publication (or a plain FULL checkpoint directory) shard by shard, in the format Publication
/// reads: every shard's `__metadata__` maps its tensor names to their (target canonical) checksums, the index carries
/// manifest_metadata() plus total_size (sum of tensor bytes) and the weight_map.
/// Shards are named model-k-of-n once n is known (at commit). Memory: a streamed shard holds nothing; buffered
/// tensors (add) are kept until their shard is full.
class PublicationWriter {
 public:
  /// atomic = true: files go to a hidden temp directory next to `dir`, renamed onto `dir` by commit(), so a
  /// reader never sees half a publication; `dir` must not exist (Error(Lineage) naming it otherwise).
  /// atomic = false: files go directly into `dir` (created when absent). fsync: shards, index and directories
  /// are fsynced before commit returns.
  PublicationWriter(std::filesystem::path dir, const PublicationManifest& manifest, uint64_t max_shard_bytes,
                    bool atomic, bool fsync);
  /// Removes the files of an uncommitted publication.
  ~PublicationWriter();
  PublicationWriter(const PublicationWriter&) = delete;
  PublicationWriter& operator=(const PublicationWriter&) = delete;

  /// Starts a streamed shard whose tensors are all known up front (a FULL shard: the bytes are the canonical
  /// tensors). Their checksums, of the bytes appended in the manifest's checksum_format (tensor_checksum.hpp), are
  /// computed by the writer: the header is written with a unique placeholder of the final length per tensor
  /// (32 hex characters per range) and patched in place when the shard ends (same length,
  /// so no byte moves), which spares callers a second pass over the data. Flushes buffered tensors first.
  void begin_shard(std::vector<TensorSpec> tensors);
  /// Starts a streamed shard whose checksums are known up front, one per tensor (a DELTA shard streamed from
  /// spilled payloads: its checksums are of the target canonical bytes, not of the bytes appended). Throws
  /// Error(Format) when the counts differ or a checksum is not of the manifest's form (32 lowercase hex
  /// characters; under "xxh3-128-ranges" one or more such digests).
  void begin_shard(std::vector<TensorSpec> tensors, std::vector<std::string> checksums);
  /// Appends bytes of the streamed shard's tensors, in declaration order.
  void append(std::span<const uint8_t> bytes);
  /// Completes the streamed shard. Throws Error(Format) when bytes are missing.
  void end_shard();
  /// Adds one tensor whose bytes are complete (e.g. a delta payload: 1-D U8, shape = byte length). The tensor
  /// joins the buffered shard, which is written first when this tensor would take it past max_shard_bytes.
  void add(TensorSpec spec, std::vector<uint8_t> bytes, std::string checksum);
  /// Adds a small file that is not a shard (a FULL checkpoint's config.json: kHfConfigFileName,
  /// models/profile/hf_config_write.hpp) with `bytes` as its content. commit() writes it before the index (so a
  /// directory whose index exists holds it too) and fsyncs it with the shards when fsync is set; it is removed
  /// with an uncommitted publication. A second call with the same name replaces the content. Throws Error(Format) when `name` is not a plain file name (empty,
  /// '/', a leading '.') or is the index or a ".safetensors" name.
  void add_file(std::string name, std::string bytes);
  /// Writes the remaining buffered shard, names the shards, writes the files of add_file and the index and moves
  /// the publication into place. Returns the bytes of all shard files written (headers included; add_file's
  /// files are not counted).
  uint64_t commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// An opened, validated publication. Construction throws wsb::Error: Missing (no such version), Format
/// (metadata field wrong, checksum not 32 hex chars, unknown checksum/compression format, delta tensor not a
/// 1-D U8, a shard resolving outside the publication directory: checked before the shard is opened), Mismatch
/// (tensor names of header, checksum map and index disagree — each named), Truncated (a shard shorter than
/// declared: not yet published), Lineage (metadata version != directory version).
/// FULL shards carry checksums too (same `__metadata__` map), so seeding can be verified. Only the index and the
/// shards it names are opened: other files of the directory (a FULL publication's config.json, for engines that
/// boot from it) are expected and never read, so their content cannot make a publication unreadable.
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
  /// FULL: dtype/shape of the stored tensor; DELTA: the 1-D U8 payload entry. Throws Error(Missing).
  const SafetensorsEntry& entry(std::string_view name) const;
  /// Expected checksum text of the target canonical bytes of `name`: one xxh3-128 hex, or one per range under
  /// "xxh3-128-ranges" (publication/tensor_checksum.hpp). Throws Error(Missing).
  const std::string& expected_checksum(std::string_view name) const;
  /// The same for a target tensor of `size` bytes, split into its ranges; throws Error(Missing), or
  /// Error(Format) when the digests do not fit `size` (naming the tensor and this publication).
  ExpectedChecksum expected_checksum(std::string_view name, uint64_t size) const;

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
  std::string plan_hash;  ///< SHA-256 hex over the ordered (version, tensor, expected checksum) fragment list
};

/// Plans a delta update. Throws Error(Missing) when `to` is not published, Error(Lineage) for a gap, a base
/// mismatch (naming both versions) or to <= from, Error(Format) when a step is FULL.
/// plan_hash: SHA-256 (lowercase hex) over the lines "VVVVVV\ttensor\texpected_checksum\n", steps in version
/// order, tensors sorted by name; expected_checksum is the target checksum from the shard `__metadata__`.
UpdatePlan plan_update(const Store& store, uint32_t from, uint32_t to);

}  // namespace wsb
