#pragma once
// zstd framing rules of publication payloads: exactly one frame, content size declared in the frame header,
// nothing after it, decompression bounded by the size the caller expects (no bombs).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace wsb {

/// One zstd frame with the content size recorded in its header.
std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data, int level);

/// Decompresses one frame into exactly `out.size()` bytes. Throws Error(Format) naming `what` when the input is
/// not a zstd frame, the declared content size is absent or differs from out.size(), the frame is truncated or
/// corrupt, or bytes follow the frame.
void zstd_decompress_exact(std::span<const uint8_t> frame, std::span<uint8_t> out, const std::string& what);

/// Decompresses one frame whose size is not known in advance, refusing (Error(Format), naming `what`) any frame
/// declaring or producing more than `max_bytes`. Same framing checks as zstd_decompress_exact.
std::vector<uint8_t> zstd_decompress_bounded(std::span<const uint8_t> frame, uint64_t max_bytes,
                                             const std::string& what);

}  // namespace wsb
