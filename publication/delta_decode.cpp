// decode_delta: decompression plus every structural rule of the xor / overwrite payloads (docs/design.md,
// "Publication format").
#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {
namespace {

uint32_t get_u32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

[[noreturn]] void fail(const std::string& tensor, const std::string& reason) {
  throw Error(ErrorKind::Format, fmt::format("overwrite delta of tensor '{}': {}", tensor, reason));
}

DecodedDelta decode_overwrite(std::span<const uint8_t> payload, uint64_t tensor_bytes, const std::string& tensor) {
  // Largest legal body: every byte overwritten (u32 count + 4-byte position + 1-byte value per byte).
  uint64_t bound = 4 + 5 * tensor_bytes;
  std::vector<uint8_t> raw =
      zstd_decompress_bounded(payload, bound, fmt::format("overwrite delta of tensor '{}'", tensor));
  if (raw.size() < 4) fail(tensor, fmt::format("{} bytes, too short for the u32 count", raw.size()));
  uint64_t count = get_u32le(raw.data());
  uint64_t needed = 4 + 5 * count;
  if (needed > raw.size()) {
    fail(tensor, fmt::format("count {} needs {} bytes, payload has {}", count, needed, raw.size()));
  }
  if (needed < raw.size()) {
    fail(tensor, fmt::format("{} trailing bytes after the {} overwrite values", raw.size() - needed, count));
  }
  DecodedDelta delta;
  delta.encoding = DeltaEncoding::Overwrite;
  delta.tensor_bytes = tensor_bytes;
  delta.positions.resize(count);
  for (uint64_t k = 0; k < count; ++k) {
    uint32_t position = get_u32le(raw.data() + 4 + 4 * k);
    if (position >= tensor_bytes) {
      fail(tensor, fmt::format("position {} (index {}) out of range for {} bytes", position, k, tensor_bytes));
    }
    if (k > 0 && position == delta.positions[k - 1]) {
      fail(tensor, fmt::format("duplicate position {} (index {})", position, k));
    }
    if (k > 0 && position < delta.positions[k - 1]) {
      fail(tensor, fmt::format("positions not strictly increasing: {} after {} (index {})", position,
                               delta.positions[k - 1], k));
    }
    delta.positions[k] = position;
  }
  delta.values.assign(raw.begin() + static_cast<std::ptrdiff_t>(4 + 4 * count), raw.end());
  return delta;
}

}  // namespace

DecodedDelta decode_delta(DeltaEncoding encoding, std::span<const uint8_t> payload, uint64_t tensor_bytes,
                          const std::string& tensor) {
  if (encoding == DeltaEncoding::Overwrite) return decode_overwrite(payload, tensor_bytes, tensor);
  DecodedDelta delta;
  delta.encoding = DeltaEncoding::Xor;
  delta.tensor_bytes = tensor_bytes;
  std::string what = fmt::format("xor mask of tensor '{}'", tensor);
  // Header first: a wrong size is refused before a tensor-sized mask is allocated.
  uint64_t declared = zstd_declared_size(payload, what);
  if (declared != tensor_bytes) {
    throw Error(ErrorKind::Format, fmt::format("{}: mask of {} bytes declared, tensor has {} bytes", what,
                                               declared, tensor_bytes));
  }
  delta.mask.resize(tensor_bytes);
  zstd_decompress_exact(payload, delta.mask, what);
  return delta;
}

}  // namespace wsb
