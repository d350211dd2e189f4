#pragma once
// Synthetic deterministic publisher: a canonical checkpoint that is a pure function of (profile, seed, version,
// density), published as FULL v0 and DELTA v1..vN in the publication format.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
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

/// Default perturbation density per dtype: BF16/F16/F32 0.01.
double default_density(DType dtype);

/// Canonical bytes of `tensor` at `version` (out.size() == tensor.bytes()): v0 is synthesized from
/// hash(profile id, seed, tensor name); each later version moves `density` of the values by one stored-code
/// step (BF16/F16/F32: lowest mantissa bit, never reaching NaN/Inf). gate_proj/up_proj of one layer share
/// their selection seed.
/// `density` nullopt = default_density(tensor.dtype).
void synthesize_canonical(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                          std::optional<double> density, std::span<uint8_t> out);

/// Writes publications first_version..last_version into the store and advances `latest`.
/// Throws Error(Lineage) when appending deltas whose base version is not published.
std::vector<PublicationStats> publish(const ModelProfile& profile, const PublishOptions& options);

/// Writes the canonical checkpoint at `version` as a FULL checkpoint directory (the native-load reference).
void write_full_checkpoint(const ModelProfile& profile, uint64_t seed, uint32_t version, std::optional<double> density,
                           const std::filesystem::path& dir, uint64_t max_shard_bytes = 2ull << 30);

}  // namespace wsb
