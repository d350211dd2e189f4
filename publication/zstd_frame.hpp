#pragma once
// zstd framing rules of publication payloads: exactly one frame, content size declared in the frame header,
// nothing after it, decompression bounded by the size the caller expects (no bombs).
// Frame facts: RFC 8878 (magic 0xFD2FB528 little-endian, Frame_Content_Size field in the frame header).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace wsb {

/// One zstd frame with the content size recorded in its header.
std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data, int level);

/// Builds one zstd frame from data fed in pieces (e.g. an xor mask computed chunk by chunk, so no tensor-sized
/// mask is ever materialized). The total is pledged up front so the frame header declares it.
class ZstdFrameEncoder {
 public:
  /// `content_size`: bytes that will be fed in total. Throws Error(Format) for an invalid `level`.
  ZstdFrameEncoder(uint64_t content_size, int level);
  ~ZstdFrameEncoder();
  ZstdFrameEncoder(const ZstdFrameEncoder&) = delete;
  ZstdFrameEncoder& operator=(const ZstdFrameEncoder&) = delete;
  /// Compresses one more piece. Throws Error(Format) when more than the pledged bytes arrive.
  void update(std::span<const uint8_t> piece);
  /// Ends the frame and returns it. Throws Error(Format) when fewer than the pledged bytes arrived.
  std::vector<uint8_t> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Content size declared by the frame header. Throws Error(Format) naming `what` when the input does not start
/// with a zstd frame header, the header declares no content size, or it asks for a window beyond 128 MiB
/// (zstd's default decoder limit; every decoder below refuses such a frame). Reads only the header.
uint64_t zstd_declared_size(std::span<const uint8_t> frame, const std::string& what);

/// One frame of a payload of consecutive frames: where its compressed bytes lie and which content bytes it produces.
struct ZstdFrameExtent {
  uint64_t offset = 0;         ///< first byte of the frame in the payload
  uint64_t compressed = 0;     ///< bytes of the frame (header, blocks, checksum)
  uint64_t content_begin = 0;  ///< content bytes of the frames before it
  uint64_t content = 0;        ///< Frame_Content_Size it declares
};

/// Walks a payload of one or more consecutive zstd frames (RFC 8878 section 3.1: compressed data is a sequence of
/// frames, whose decompressed contents concatenate). Every frame must start with the zstd magic number, declare
/// its content size, ask for a window of at most 128 MiB and be complete (its blocks are walked, not decoded);
/// the last one must end exactly at the payload's end, and the declared sizes may add up to at most
/// `max_content` (checked before the next frame is walked, so a lying header costs nothing). Throws Error(Format)
/// naming `what`, the frame's index and byte offset and the reason, e.g. "<what>, frame 2 at byte 4180: truncated
/// or corrupt zstd frame (...)". An empty payload has no frame and is refused ("not a zstd frame").
std::vector<ZstdFrameExtent> zstd_frame_extents(std::span<const uint8_t> payload, uint64_t max_content,
                                                const std::string& what);

/// Decompresses one frame into exactly `out.size()` bytes. Throws Error(Format) naming `what` when the input is
/// not a zstd frame, the declared content size is absent or differs from out.size(), the window exceeds 128 MiB,
/// the frame is truncated or corrupt, or bytes follow the frame.
void zstd_decompress_exact(std::span<const uint8_t> frame, std::span<uint8_t> out, const std::string& what);

/// Decompresses one frame whose size is not known in advance, refusing (Error(Format), naming `what`) any frame
/// declaring or producing more than `max_bytes`. Same framing checks as zstd_decompress_exact. The declared size
/// is checked before anything is allocated, and the output grows only as decoded bytes arrive (a header that lies
/// costs no more memory than the frame really produces, and never more than the declared size).
std::vector<uint8_t> zstd_decompress_bounded(std::span<const uint8_t> frame, uint64_t max_bytes,
                                             const std::string& what);

/// zstd_decompress_bounded into caller memory: `frame` declares exactly out.size() bytes (the caller checked the
/// header against its bound and sized `out`, e.g. scratch reserved for it), and is decoded by streaming, so a frame
/// that produces fewer or more bytes than it declares fails with zstd_decompress_bounded's errors after writing no
/// more than out.size() bytes. Throws Error(Format) naming `what`.
void zstd_decompress_declared(std::span<const uint8_t> frame, std::span<uint8_t> out, const std::string& what);

}  // namespace wsb
