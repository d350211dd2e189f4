#pragma once
// Applying an xor payload by streaming: the zstd output is xored into the tensor chunk by chunk, so no
// tensor-sized mask is allocated or zero-filled (the xor format: one zstd frame of a mask as long as the tensor).
#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include "publication/delta_codec.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {

/// out[i] ^= mask[i] for i < n (bytes), word-parallel: the xor of every streamed apply and of the fold.
void xor_into(uint8_t* out, const uint8_t* mask, size_t n);

/// data ^= decompress(payload), with the framing rules of decode_delta (exactly one frame, declared content size
/// == data.size(), nothing after the frame). On any error `data` is restored before Error(Format) naming the
/// tensor is thrown. Applying the same payload twice restores the original bytes.
void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor);

/// Called with the end offset (bytes) of data that has been xored so far, in increasing order, after each chunk:
/// lets a caller hash or scan the result while it is still in cache. Reaches data.size() when the apply succeeds.
using XorProgress = std::function<void(size_t xored_upto)>;

/// apply_xor_payload, calling `progress` after every chunk (not during the restore that follows an error).
void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor,
                       const XorProgress& progress);

/// Checks the framing of xor payload `payload` for a tensor of `tensor_bytes` bytes before anything is changed and
/// returns what MaskReader::open takes: OneFrame: no extents (the one frame's header declares exactly tensor_bytes,
/// zstd_declared_size); Frames: zstd_frame_extents, whose contents add up to exactly tensor_bytes. Throws
/// Error(Format) "xor mask of tensor 'T': mask of N bytes declared, tensor has M bytes", or as zstd_declared_size /
/// zstd_frame_extents word a header that is not a zstd frame, declares no size or a window beyond 128 MiB.
std::vector<ZstdFrameExtent> xor_mask_frames(std::span<const uint8_t> payload, PayloadFraming framing,
                                             uint64_t tensor_bytes, const std::string& tensor);

/// Throws Error(Format) "xor mask of tensor 'T': <reason>": how every xor decoder words a MaskReader reason (and
/// apply_xor_payload its own), so a bad frame reads the same from every prepare path.
[[noreturn]] void throw_xor_mask_error(const std::string& tensor, const std::string& reason);

/// Reads the xor mask of one payload front to back, in pieces the caller chooses, with a zstd decoder reused from
/// payload to payload (a prepare worker keeps one per delta step: no decoder allocated per tensor). It can start
/// at any frame of a multi-frame payload, so several readers decode disjoint ranges of one mask in parallel.
class MaskReader {
 public:
  MaskReader();
  ~MaskReader();
  MaskReader(MaskReader&&) noexcept;
  MaskReader& operator=(MaskReader&&) noexcept;

  /// Starts at mask byte `begin` of `payload`. `frames` empty: the payload is one frame (the "zstd" framing) of
  /// `total` mask bytes whose header the caller has checked (zstd_declared_size == total), and `begin` is 0.
  /// Otherwise `frames` are the payload's zstd_frame_extents (kept by the caller while reading), adding up to
  /// `total`, and `begin` is the content_begin of one of them.
  void open(std::span<const uint8_t> payload, std::span<const ZstdFrameExtent> frames, uint64_t total,
            uint64_t begin);
  /// Decodes the next out.size() mask bytes into `out` (not beyond `total`). Returns "" or why it stopped, as
  /// apply_xor_payload words it after "xor mask of tensor 'T': " (e.g. "truncated zstd frame"); with frames, the
  /// reason starts "frame 3 at byte 812: ".
  std::string read(std::span<uint8_t> out);
  /// After the read that reached mask byte `total` (or a frame boundary): checks that the frame being read ends
  /// exactly there, with nothing after it for a single frame. Returns "" or the reason.
  std::string finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wsb
