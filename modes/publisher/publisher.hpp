#pragma once
// Synthetic deterministic publisher: a canonical checkpoint that is a pure function of (profile, seed, version,
// density), published as FULL v0 and DELTA v1..vN in the publication format.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/profile/profile.hpp"
#include "modes/codec/delta_codec.hpp"

namespace wsb {

struct PublishOptions {
  std::filesystem::path store;
  uint32_t first_version = 0;  ///< 0 writes FULL v0; >0 appends deltas (base = previous version)
  uint32_t last_version = 3;
  uint64_t seed = 0;
  std::optional<double> density;  ///< fraction of values moved per version; default per dtype
  DeltaEncoding encoding = DeltaEncoding::Xor;
  int zstd_level = 1;
  uint64_t max_shard_bytes = 2ull << 30;  ///< shard split threshold (bytes of stored data)
  bool fsync = false;
  bool advance_latest = true;
};

struct PublicationStats {
  uint32_t version = 0;
  bool full = false;
  uint64_t canonical_bytes = 0;  ///< bytes of the canonical checkpoint
  uint64_t stored_bytes = 0;     ///< bytes written to shards (compressed payloads for deltas)
  uint64_t changed_values = 0;   ///< values moved by one code step in this version
  double seconds = 0;
};

/// Default perturbation density per dtype: BF16/F16/F32 0.01. Throws Error(Format) naming the dtype for a
/// dtype without a perturbation rule (FP8 / FP4 arrive with the quantized profiles).
double default_density(DType dtype);

/// Group whose selection stream a tensor uses: its name, with ".gate_proj." and ".up_proj." replaced by
/// ".gate_up_proj." so that the two halves of one fused gate_up (dense MLP or one expert) move the same
/// positions. E.g. "model.layers.0.mlp.up_proj.weight" -> "model.layers.0.mlp.gate_up_proj.weight".
std::string selection_group(std::string_view tensor_name);

/// Canonical bytes of `tensor` at version 0 (out.size() == tensor.bytes(), little-endian codes). Values are
/// uniform draws of a counter-based hash of (profile id without its "@scale" suffix, seed, tensor name, element
/// index): "*norm.weight" 1 + U(-0.05, 0.05); "*embed_tokens*" U(-0.5, 0.5); other tensors of rank >= 2
/// U(-1/sqrt(in), 1/sqrt(in)) with in = last dimension; remaining 1-D/scalar tensors U(-0.02, 0.02).
/// Throws Error(Mismatch) for a wrong out size, Error(Format) for a dtype other than BF16/F16/F32.
void synthesize_initial(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed,
                        std::span<uint8_t> out);

/// Moves `data` (the tensor at version - 1) to `version` in place: each element is selected independently with
/// probability `density` (a 32-bit draw of the counter-based hash of (profile, seed, version, selection_group,
/// element index) below density * 2^32) and its stored code's lowest bit flipped (BF16/F16/F32: the lowest
/// mantissa bit, so a finite value stays finite).
/// Returns the number of elements moved. Throws Error(Format) for density outside [0, 1] or an unsupported dtype.
uint64_t perturb_version(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                         double density, std::span<uint8_t> data);

/// Canonical bytes of `tensor` at `version` (out.size() == tensor.bytes()): v0 is synthesized from
/// hash(profile id, seed, tensor name); each later version moves `density` of the values by one stored-code
/// step (BF16/F16/F32: lowest mantissa bit, never reaching NaN/Inf). gate_proj/up_proj of one layer share
/// their selection seed.
/// `density` nullopt = default_density(tensor.dtype).
void synthesize_canonical(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                          std::optional<double> density, std::span<uint8_t> out);

/// Writes publications first_version..last_version into the store and advances `latest` (when
/// options.advance_latest) to last_version after all of them are in place. Version 0 is FULL (shards split at
/// max_shard_bytes, checksums in every shard's __metadata__), every later version k a DELTA with base k - 1
/// encoded with options.encoding from the canonical bytes of k - 1 to those of k. Each publication is written to
/// a hidden temp directory and renamed into place. Memory: two tensors plus the delta payloads of one shard per
/// version. Returns one PublicationStats per version (seconds = time spent producing that version; stored_bytes
/// = shard file sizes, headers included).
/// Throws Error(Lineage) when appending deltas whose base version is not published, or when a version of the
/// range is already published (publications are immutable); Error(Checksum) naming the tensor when the
/// published base version was not produced by the same (profile, seed, density); Error(Format) for
/// first_version > last_version.
std::vector<PublicationStats> publish(const ModelProfile& profile, const PublishOptions& options);

/// Writes the canonical checkpoint at `version` as a FULL checkpoint directory (the native-load reference).
void write_full_checkpoint(const ModelProfile& profile, uint64_t seed, uint32_t version, std::optional<double> density,
                           const std::filesystem::path& dir, uint64_t max_shard_bytes = 2ull << 30);

}  // namespace wsb
