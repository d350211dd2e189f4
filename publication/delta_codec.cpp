#include "publication/delta_codec.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {
namespace {

// Masks are computed and compressed in pieces of this size, so encoding never holds a tensor-sized mask.
constexpr size_t kXorChunk = size_t{1} << 20;

void put_u32le(std::vector<uint8_t>& out, size_t at, uint32_t value) {
  out[at] = static_cast<uint8_t>(value);
  out[at + 1] = static_cast<uint8_t>(value >> 8);
  out[at + 2] = static_cast<uint8_t>(value >> 16);
  out[at + 3] = static_cast<uint8_t>(value >> 24);
}

/// One frame of the mask of bytes [begin, end).
std::vector<uint8_t> encode_xor_frame(std::span<const uint8_t> base, std::span<const uint8_t> target, size_t begin,
                                      size_t end, int level) {
  ZstdFrameEncoder encoder(end - begin, level);
  std::vector<uint8_t> mask(std::min(end - begin, kXorChunk));
  for (size_t at = begin; at < end; at += kXorChunk) {
    size_t n = std::min(kXorChunk, end - at);
    for (size_t i = 0; i < n; ++i) mask[i] = base[at + i] ^ target[at + i];
    encoder.update(std::span<const uint8_t>(mask.data(), n));
  }
  return encoder.finish();
}

std::vector<uint8_t> encode_xor(std::span<const uint8_t> base, std::span<const uint8_t> target, int level,
                                uint64_t frame_bytes) {
  if (frame_bytes == 0 || frame_bytes >= base.size()) return encode_xor_frame(base, target, 0, base.size(), level);
  std::vector<uint8_t> out;
  for (size_t at = 0; at < base.size(); at += frame_bytes) {
    const std::vector<uint8_t> frame =
        encode_xor_frame(base, target, at, std::min<size_t>(base.size(), at + frame_bytes), level);
    out.insert(out.end(), frame.begin(), frame.end());
  }
  return out;
}

std::vector<uint8_t> encode_overwrite(std::span<const uint8_t> base, std::span<const uint8_t> target, int level,
                                      uint64_t frame_bytes) {
  // Positions are u32 (publication format), so only the first 4 GiB of a tensor are addressable.
  std::vector<uint32_t> positions;
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] == target[i]) continue;
    if (i > UINT32_MAX) {
      throw Error(ErrorKind::Format,
                  fmt::format("overwrite delta: byte position {} does not fit the format's u32 positions", i));
    }
    positions.push_back(static_cast<uint32_t>(i));
  }
  size_t count = positions.size();
  std::vector<uint8_t> raw(4 + 5 * count);
  put_u32le(raw, 0, static_cast<uint32_t>(count));
  for (size_t k = 0; k < count; ++k) {
    put_u32le(raw, 4 + 4 * k, positions[k]);
    raw[4 + 4 * count + k] = target[positions[k]];
  }
  if (frame_bytes == 0 || raw.size() <= kOverwriteFrameBytes) return zstd_compress(raw, level);
  std::vector<uint8_t> out;
  for (size_t at = 0; at < raw.size(); at += kOverwriteFrameBytes) {
    const size_t n = std::min<size_t>(kOverwriteFrameBytes, raw.size() - at);
    const std::vector<uint8_t> frame = zstd_compress(std::span<const uint8_t>(raw).subspan(at, n), level);
    out.insert(out.end(), frame.begin(), frame.end());
  }
  return out;
}

}  // namespace

std::string_view compression_format_name(PayloadFraming framing) {
  return framing == PayloadFraming::OneFrame ? kZstdOneFrame : kZstdFrames;
}

std::optional<PayloadFraming> parse_compression_format(std::string_view name) {
  if (name == kZstdOneFrame) return PayloadFraming::OneFrame;
  if (name == kZstdFrames) return PayloadFraming::Frames;
  return std::nullopt;
}

std::string_view delta_encoding_name(DeltaEncoding encoding) {
  return encoding == DeltaEncoding::Xor ? "xor" : "overwrite";
}

std::optional<DeltaEncoding> parse_delta_encoding(std::string_view name) {
  if (name == "xor") return DeltaEncoding::Xor;
  if (name == "overwrite") return DeltaEncoding::Overwrite;
  return std::nullopt;
}

std::vector<uint8_t> encode_delta(DeltaEncoding encoding, std::span<const uint8_t> base,
                                  std::span<const uint8_t> target, int zstd_level, uint64_t frame_bytes) {
  if (base.size() != target.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("{} delta: base has {} bytes, target {}",
                                                 delta_encoding_name(encoding), base.size(), target.size()));
  }
  return encoding == DeltaEncoding::Xor ? encode_xor(base, target, zstd_level, frame_bytes)
                                        : encode_overwrite(base, target, zstd_level, frame_bytes);
}

void apply_delta_swap(DecodedDelta& delta, std::span<uint8_t> data) {
  if (data.size() != delta.tensor_bytes) {
    throw Error(ErrorKind::Mismatch, fmt::format("{} delta for {} bytes applied to {} bytes",
                                                 delta_encoding_name(delta.encoding), delta.tensor_bytes,
                                                 data.size()));
  }
  if (delta.encoding == DeltaEncoding::Xor) {
    const uint8_t* mask = delta.mask.data();
    uint8_t* out = data.data();
    for (size_t i = 0; i < data.size(); ++i) out[i] ^= mask[i];
    return;
  }
  for (size_t k = 0; k < delta.positions.size(); ++k) std::swap(data[delta.positions[k]], delta.values[k]);
}

}  // namespace wsb
