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

}  // namespace wsb
