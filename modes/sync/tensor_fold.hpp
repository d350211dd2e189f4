#pragma once
// Folding every step of an update plan into one canonical tensor, segment by segment and chunk by chunk: each
// chunk of each step is decoded into cache, the steps are combined into one mask (old ^ new) there, and the tensor
// is read and written once however many steps the plan has (a catch-up 1->3 costs three decodes but one memory
// pass). A plan of overwrite steps only writes each changed byte in place, step by step, and never writes back a
// line without a change. A tensor whose every xor payload is split into frames ("zstd-frames") has one segment per common frame
// boundary, so its segments fold on different threads; a one-frame payload keeps the tensor in one segment (zstd
// decodes one frame front to back). Overwrite steps are decoded once per tensor and do not constrain segments.
//
// Undo: a segment records how many of its bytes hold the target; unfold_segment puts exactly those back (xor
// steps are decoded again, overwrite steps swap back the bytes they replaced, kept in their body's values).
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/checksum.hpp"
#include "core/tensor_spec.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "core/scratch_bytes.hpp"
#include "publication/xor_stream.hpp"

namespace wsb {

/// One chunk of a folded tensor whose bytes hold the target version (every step applied).
struct FoldChunk {
  uint64_t from = 0;                ///< first byte of the chunk in the tensor
  uint64_t to = 0;                  ///< one past its last byte
  std::span<const uint8_t> tensor;  ///< the whole tensor; bytes [from, to) are final, others may still change
  std::span<const uint8_t> mask;    ///< to - from bytes: old ^ new, non-zero exactly where the fold changed a byte
};

/// Called once per chunk after it is applied (before the tensor's checksum is verified: nothing built from it may
/// be used until the fold has returned). Chunks of one segment come in order; segments may run on different
/// threads at once, so a sink must accept disjoint chunks concurrently.
using FoldChunkSink = std::function<void(const FoldChunk&)>;

/// Sizes of a fold's units of work, in bytes.
struct FoldOptions {
  /// One chunk: the mask and a decoded step piece stay in a core's L2 with the tensor bytes they touch.
  uint64_t chunk_bytes = 256 << 10;
  /// Segments of a multi-frame tensor are at least this long (frames are merged up to it), so a frame size chosen
  /// too small by a publisher costs no per-segment overhead.
  uint64_t min_segment_bytes = 4 << 20;
  /// An overwrite-only plan splits a tensor into segments of this size (nothing else constrains them).
  uint64_t segment_bytes = 32 << 20;
};

/// What one worker thread keeps from tensor to tensor (and, owned by a long-lived image, from prepare to prepare):
/// a mask reader per delta step (its zstd decoder and window stay allocated), the chunk buffers, and a hash state.
struct FoldScratch {
  std::vector<MaskReader> readers;
  ScratchBytes mask, piece;
  Xxh3Hasher hasher;
};

/// One tensor of a plan, opened for folding.
class TensorFold {
 public:
  /// Checks every step's payload of `spec` before anything is changed: xor headers (one frame: the declared
  /// size; frames: zstd_frame_extents), overwrite bodies decoded and validated into `bodies` (one per step, reused
  /// across prepares; only overwrite steps' entries are used, and they must outlive this object). `bytes` is the
  /// tensor at plan.from. Throws Error(Format) naming the tensor, as apply_xor_payload / decode_delta word it, or
  /// when the last step's checksum does not fit the tensor's size (Publication::expected_checksum).
  TensorFold(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes,
             std::vector<OverwriteBody>& bodies, const FoldOptions& options = {});
  TensorFold(const TensorFold&) = delete;
  TensorFold& operator=(const TensorFold&) = delete;

  const TensorSpec& spec() const { return spec_; }
  std::span<uint8_t> bytes() const { return bytes_; }
  /// Checksum the last step publishes for the target bytes. Under "xxh3-128-ranges" every segment boundary is a
  /// range boundary, so each segment can be verified on its own.
  const ExpectedChecksum& expected_checksum() const { return expected_; }
  size_t segment_count() const { return bounds_.size() - 1; }
  uint64_t segment_begin(size_t s) const { return bounds_[s]; }
  uint64_t segment_end(size_t s) const { return bounds_[s + 1]; }

  /// Applies every step to segment `s`, chunk by chunk, calling `sink` after each chunk (see FoldChunkSink) and
  /// scanning the final codes (suspect_codes). Returns false when it stopped early because `stop` was set (checked
  /// before each chunk). Throws Error(Format) naming the tensor when a payload turns out bad mid-stream (corrupt
  /// or truncated frame, a frame longer than declared, bytes after a one-frame payload), or what `sink` throws;
  /// the chunks applied before stay applied (applied_bytes) until unfold_segment.
  bool fold_segment(size_t s, FoldScratch& scratch, const FoldChunkSink& sink, const std::atomic<bool>* stop);
  /// Bytes of segment `s` (from its start) that hold the target version.
  uint64_t applied_bytes(size_t s) const { return applied_[s]; }
  /// True when the code scan of segment `s` saw a code invalid in the tensor's format (check_codes then gives
  /// the exact error); meaningful once the segment is folded.
  bool suspect_codes(size_t s) const { return suspect_[s] != 0; }
  /// Restores the applied bytes of segment `s` to plan.from (applied_bytes becomes 0). Never throws for payloads
  /// that folded: they decode the same again (the store's files are immutable once published).
  void unfold_segment(size_t s, FoldScratch& scratch);

 private:
  struct Step {
    DeltaEncoding encoding = DeltaEncoding::Xor;
    std::span<const uint8_t> payload;
    std::vector<ZstdFrameExtent> frames;  ///< xor, "zstd-frames": every frame; "zstd": empty
    OverwriteBody* body = nullptr;        ///< overwrite
  };
  void open_readers(FoldScratch& scratch, uint64_t begin);

  TensorSpec spec_;
  std::span<uint8_t> bytes_;
  uint64_t chunk_;
  ExpectedChecksum expected_;
  std::vector<Step> steps_;
  bool any_xor_ = false;          ///< a step is xor-encoded (else every step is applied in place)
  std::vector<uint64_t> bounds_;  ///< segment s = [bounds_[s], bounds_[s + 1])
  std::vector<uint64_t> applied_;
  std::vector<uint8_t> suspect_;
};

}  // namespace wsb
