#pragma once
// Folding a lineage into one canonical tensor front to back, chunk by chunk: every step of the plan is advanced
// over the same chunk before the next one is touched, the chunk is hashed and its codes scanned while it is in
// cache, so a catch-up of k deltas costs one read-modify-write of the tensor's bytes, not k. The caller streams the
// tensor through (disk mode: from the base checkpoint into a temporary file) and keeps nothing else of it.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/checksum.hpp"
#include "core/scratch_bytes.hpp"
#include "core/tensor_spec.hpp"
#include "models/quant/code_check.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "publication/xor_stream.hpp"

namespace wsb {

class TensorChunkFold {
 public:
  /// Folds plan.steps (none: the bytes are only verified) into tensor `spec`, whose final bytes must have the
  /// checksum `expected` (Publication::expected_checksum for spec.bytes(): one digest or one per range, each range
  /// verified as soon as its last byte is folded) of version `version`. Each step's payload is read as its
  /// manifest's compression_format frames it ("zstd" or "zstd-frames"). Decodes the overwrite payloads and checks
  /// every xor frame header now, in step order, throwing OverwriteBody::decode's / xor_mask_frames' Error(Format)
  /// naming the tensor. `plan` must outlive the fold.
  TensorChunkFold(const UpdatePlan& plan, const TensorSpec& spec, ExpectedChecksum expected, uint32_t version);
  TensorChunkFold(const TensorChunkFold&) = delete;
  TensorChunkFold& operator=(const TensorChunkFold&) = delete;

  /// `chunk` holds bytes [position(), position() + chunk.size()) of the tensor at plan.from; on return they hold
  /// the target's. Every chunk but the last must be a multiple of 8 bytes long (whole code words). Throws
  /// Error(Format) for a bad payload (naming the tensor, as apply_xor_payload), Error(State) for a chunk past the
  /// tensor's end or a misaligned one. After a throw the fold is unusable.
  void apply(std::span<uint8_t> chunk);
  uint64_t position() const { return position_; }

  /// After the last chunk: checks each xor payload's last frame ended exactly (MaskReader::finish), then the checksum
  /// (Error(Checksum) as throw_checksum_mismatch words it), then the codes: when an
  /// invalid one was seen, check_codes runs on `final_bytes()` (the whole folded tensor, fetched only then) for
  /// its exact Error(Format) "publication V: tensor 'T' ... element ...".
  void finish(const std::function<std::vector<uint8_t>()>& final_bytes);

 private:
  struct Step {
    bool is_xor = false;
    std::vector<ZstdFrameExtent> frames;  ///< xor, "zstd-frames": every frame (the reader holds a span of them)
    MaskReader mask;                      ///< xor
    OverwriteBody overwrite;              ///< overwrite
    uint64_t next = 0;                    ///< first overwrite position not yet applied
  };
  void apply_block(std::span<uint8_t> block);

  TensorSpec spec_;
  ExpectedChecksum expected_;
  uint32_t version_;
  std::vector<Step> steps_;
  ScratchBytes piece_;  ///< one block of a step's mask
  Xxh3Hasher hasher_;
  RangeVerifier verifier_;  ///< on expected_ and hasher_
  CodeScanner scanner_;  ///< pristine (cursor 0): copied for each block, which starts on a code word
  bool invalid_code_ = false;
  uint64_t position_ = 0;
};

}  // namespace wsb
