#pragma once
// Synthetic deterministic publisher: a canonical checkpoint that is a pure function of (profile, seed, version,
// density), published as FULL v0 and DELTA v1..vN in the publication format.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/profile/profile.hpp"
#include "publication/delta_codec.hpp"

namespace wsb {

struct PublishOptions {
  std::filesystem::path store;
  uint32_t first_version = 0;  ///< 0 writes FULL v0; >0 appends deltas (base = previous version)
  uint32_t last_version = 3;
  uint64_t seed = 0;
  std::optional<double> density;  ///< fraction of values moved per version; default per dtype
  DeltaEncoding encoding = DeltaEncoding::Xor;
  /// xor mask bytes per zstd frame: 0 writes one frame per payload (compression_format "zstd", what the
  /// Stitch/SGLang fork reads); > 0 writes compression_format "zstd-frames" (publication/delta_codec.hpp), and
  /// must then be a multiple of 4096 (frame_bytes_problem).
  uint64_t frame_bytes = 0;
  /// DELTA checksums: 0 writes checksum_format "xxh3-128" (one digest per tensor, what the Stitch/SGLang fork
  /// reads); > 0 writes "xxh3-128-ranges" with one digest per this many bytes (publication/tensor_checksum.hpp),
  /// a multiple of 1 MiB (checksum_range_bytes_problem). FULL v0 keeps "xxh3-128".
  uint64_t checksum_range_bytes = 0;
  int zstd_level = 1;
  uint64_t max_shard_bytes = 2ull << 30;  ///< shard split threshold (bytes of stored data)
  bool fsync = false;
  bool advance_latest = true;
  /// Worker threads that synthesize, perturb and compress tensors (written in checkpoint order by the caller; the
  /// published bytes are the same for any count).
  int threads = 1;
  /// Empty: version 0 is synthesized (synthesize_initial). Else a real checkpoint directory (Hugging Face layout,
  /// the profile's tensors): version 0 is its bytes and later versions perturb them (perturb_version).
  std::filesystem::path initial_checkpoint;
};

/// "" when `frame_bytes` is a valid PublishOptions::frame_bytes, else why not ("must be 0 (one zstd frame per
/// payload) or a multiple of 4096, got N"): a frame then starts on a page of the mask, a boundary prepare's fold
/// can split a tensor at. The publish command and a matrix cell's frame_bytes both check it.
std::string frame_bytes_problem(uint64_t frame_bytes);

/// Elements of one class of codes in a publication, and how many of them differ from the base version.
struct ChangeCount {
  uint64_t elements = 0;
  uint64_t changed = 0;
  bool operator==(const ChangeCount&) const = default;
};

struct PublicationStats {
  uint32_t version = 0;
  bool full = false;
  uint64_t canonical_bytes = 0;  ///< bytes of the canonical checkpoint
  uint64_t stored_bytes = 0;     ///< bytes written to shards (compressed payloads for deltas)
  uint64_t changed_values = 0;   ///< elements that differ from the base version (0 for FULL)
  double seconds = 0;  ///< compute time of this version summed over the publish threads, plus its writes
  /// Elements (change_class units) of the canonical checkpoint and those changed, per change_class; every class of
  /// the checkpoint is present (changed 0 for FULL).
  std::map<std::string, ChangeCount> changes;
  std::optional<DeltaEncoding> encoding;  ///< the DELTA's encoding; nullopt for FULL
  /// Payload bytes (compressed, no shard headers) of each encoding that was tried: the one used, and with
  /// automatic encoding the other one too.
  std::map<std::string, uint64_t> payload_bytes;
  std::filesystem::path source;  ///< the checkpoint directory this version was published from; empty: synthetic

  /// Changed elements over all elements (0 when there are none).
  double density() const;
  /// canonical_bytes / stored_bytes (0 when nothing was stored).
  double compression_ratio() const;
};

/// The unit and label changed elements are counted in for `tensor`: one element per stored value of its dtype
/// ("BF16", "F32", "F8_E4M3", ... as dtype_name), except packed E2M1 (quant_role: two codes per U8 byte), counted per
/// 4-bit code and labelled "E2M1".
std::string change_class(const TensorSpec& tensor);
/// Elements of `tensor` in change_class units (code_count).
uint64_t change_elements(const TensorSpec& tensor);
/// Elements of `tensor` whose stored code differs between `base` and `target` (both tensor.bytes() long), in
/// change_class units. Throws Error(Mismatch) naming the tensor for a wrong size.
uint64_t count_changed(const TensorSpec& tensor, std::span<const uint8_t> base, std::span<const uint8_t> target);

/// Default perturbation density per dtype, for callers that know only the dtype: BF16/F16/F32 0.01, F8_E4M3
/// 0.006, U8 (packed E2M1 or E8M0 scales) and F8_E8M0 0.003. Throws Error(Format) naming the dtype otherwise.
double default_density(DType dtype);

/// Default perturbation density of one tensor (FP8 0.006, NVFP4/MXFP4 0.003, high precision 0.01),
/// by quant_role (models/quant/quant_role.hpp): every part of a quantized weight moves at its method's density,
/// F32 scales included (FP8 weight and its F32 weight_scale 0.006; NVFP4 packed weight, E4M3 weight_scale and
/// F32 weight_scale_2 0.003; MXFP4 *_blocks and *_scales 0.003); immutable input_scale 0; unquantized tensors
/// by dtype (BF16/F16/F32 0.01). Throws Error(Format) naming the tensor when it has no perturbation rule.
double default_density(const TensorSpec& tensor);

/// True for tensors no version ever changes: every `*input_scale` (activation calibration) and names under a
/// prefix of the profile JSON's optional string array "immutable_prefixes".
bool is_immutable(const ModelProfile& profile, const TensorSpec& tensor);

/// Group whose selection stream a tensor uses: its name, with ".gate_proj." and ".up_proj." replaced by
/// ".gate_up_proj." so that the two halves of one fused gate_up (dense MLP or one expert) move the same
/// positions (their weight_scale_2 scalars too, which therefore stay equal). E.g.
/// "model.layers.0.mlp.up_proj.weight" -> "model.layers.0.mlp.gate_up_proj.weight".
std::string selection_group(std::string_view tensor_name);

/// Canonical bytes of `tensor` at version 0 (out.size() == tensor.bytes(), little-endian codes). Values are
/// uniform draws u in [0, 1) of a counter-based hash of (profile id without its "@scale" suffix, seed, tensor
/// name, element index), by quant_role:
/// - unquantized BF16/F16/F32: "*norm.weight" 1 + U(-0.05, 0.05); "*embed_tokens*" U(-0.5, 0.5); other tensors
///   of rank >= 2 U(-1/sqrt(in), 1/sqrt(in)) with in = last dimension, except gpt-oss's stacked BF16
///   "*.experts.gate_up_proj" / "*.experts.down_proj" [E, in, out], whose in is dimension 1; remaining 1-D/scalar
///   tensors U(-0.02, 0.02).
/// - FP8 (F8_E4M3 weight): E4M3 RNE of U(-448, 448), the full finite range; F32 weight_scale [out, 1] (and
///   weight_scale_inv) U(0.75, 1.25) / (448 sqrt(hidden)), the profile's hidden size standing in for the fan-in
///   that an [out, 1] scale does not show; dequantized weights are then about U(-1/sqrt(hidden), ..).
/// - NVFP4: packed E2M1 weight uniform over all 16 codes per nibble; E4M3 weight_scale RNE of
///   U(0.75, 1.25) * 2^11 / (6 sqrt(K)), K = 16 * last dim (a narrow range: 3.0..5.0 at K = 7168);
///   weight_scale_2 = 2^-11 (a constant, so gate and up of one expert hold the same one); input_scale = 2^-8.
///   Dequantized weights: |w| <= 6 * block_scale * 2^-11 ~ 1.25/sqrt(K).
/// - MXFP4: *_blocks uniform over all 16 E2M1 codes; *_scales (E8M0) 2^(e0 - d), d in {0, 1} per block,
///   e0 = round(log2(1 / (6 sqrt(K)))), K = 32 * last dim (gpt-oss K = 2880: 2^-9 or 2^-8).
/// Throws Error(Mismatch) for a wrong out size, Error(Format) naming the tensor for a dtype/name without a rule.
void synthesize_initial(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed,
                        std::span<uint8_t> out);

/// Moves `data` (the tensor at version - 1) to `version` in place: each element (each E2M1 nibble of packed
/// FP4) is selected independently with probability `density` (a 32-bit draw of the counter-based hash of
/// (profile, seed, version, selection_group, element index) below density * 2^32) and its stored code moved by
/// one step that stays valid (models/quant/code_step.hpp): BF16/F16/F32 the lowest mantissa bit flipped (finite
/// stays finite); E4M3 the lowest mantissa bit flipped, the top code 0x7E/0xFE stepping to 0x7D/0xFD (never
/// NaN); E2M1 the lowest magnitude bit flipped, sign kept; E8M0 the exponent +-1 by flipping its lowest bit,
/// 0xFE stepping to 0xFD (never 0xFF). Immutable tensors (is_immutable) are left as they are.
/// Returns the number of elements moved. Throws Error(Format) for density outside [0, 1] or an unsupported
/// dtype, Error(Mismatch) for a wrong data size.
uint64_t perturb_version(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                         double density, std::span<uint8_t> data);

/// Canonical bytes of `tensor` at `version` (out.size() == tensor.bytes()): synthesize_initial, then
/// perturb_version for versions 1..version. gate_proj/up_proj of one layer or expert share their selection
/// seed. `density` nullopt = default_density(tensor).
void synthesize_canonical(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                          std::optional<double> density, std::span<uint8_t> out);

/// Writes publications first_version..last_version into the store and advances `latest` (when
/// options.advance_latest) to last_version after all of them are in place. Version 0 is FULL (shards split at
/// max_shard_bytes, checksums in every shard's __metadata__), every later version k a DELTA with base k - 1
/// encoded with options.encoding from the canonical bytes of k - 1 to those of k. FULL v0 also holds config.json
/// (hf_config_text(profile), models/profile/hf_config_write.hpp); DELTAs hold index and shards only. Each
/// publication is written to a hidden temp directory and renamed into place. Memory: two tensors plus the delta
/// payloads of one shard per version. Returns one PublicationStats per version (seconds = time spent producing that version; stored_bytes
/// = shard file sizes, headers included).
/// Throws Error(Lineage) when appending deltas whose base version is not published, or when a version of the
/// range is already published (publications are immutable); Error(Checksum) naming the tensor when the
/// published base version was not produced by the same (profile, seed, density); Error(Format) for
/// first_version > last_version; hf_config_text's errors (then nothing is written).
std::vector<PublicationStats> publish(const ModelProfile& profile, const PublishOptions& options);

/// Writes the canonical checkpoint at `version` as a FULL checkpoint directory (the native-load reference, and
/// what an engine fork boots from: index, shards and config.json = hf_config_text(profile)), synthesizing tensors
/// on `threads` workers (the bytes are the same for any thread count). `initial_checkpoint` as in PublishOptions:
/// version 0 read from that directory instead of synthesized.
void write_full_checkpoint(const ModelProfile& profile, uint64_t seed, uint32_t version, std::optional<double> density,
                           const std::filesystem::path& dir, uint64_t max_shard_bytes = 2ull << 30, int threads = 1,
                           const std::filesystem::path& initial_checkpoint = {});

}  // namespace wsb
