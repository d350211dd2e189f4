// decode_delta and OverwriteBody: decompression plus every structural rule of the xor / overwrite payloads
// (docs/design.md, "Publication format"), for both framings.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

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

std::string overwrite_what(const std::string& tensor) { return fmt::format("overwrite delta of tensor '{}'", tensor); }

/// Largest legal body: every byte overwritten (u32 count + 4-byte position + 1-byte value per byte).
uint64_t overwrite_bound(uint64_t tensor_bytes) { return 4 + 5 * tensor_bytes; }

/// Checks a decompressed overwrite body; returns its count.
uint64_t validate_overwrite(const uint8_t* raw, uint64_t size, uint64_t tensor_bytes, const std::string& tensor) {
  if (size < 4) fail(tensor, fmt::format("{} bytes, too short for the u32 count", size));
  const uint64_t count = get_u32le(raw);
  const uint64_t needed = 4 + 5 * count;
  if (needed > size) fail(tensor, fmt::format("count {} needs {} bytes, payload has {}", count, needed, size));
  if (needed < size) fail(tensor, fmt::format("{} trailing bytes after the {} overwrite values", size - needed, count));
  uint32_t previous = 0;
  for (uint64_t k = 0; k < count; ++k) {
    const uint32_t position = get_u32le(raw + 4 + 4 * k);
    if (position >= tensor_bytes) {
      fail(tensor, fmt::format("position {} (index {}) out of range for {} bytes", position, k, tensor_bytes));
    }
    if (k > 0 && position == previous) fail(tensor, fmt::format("duplicate position {} (index {})", position, k));
    if (k > 0 && position < previous) {
      fail(tensor,
           fmt::format("positions not strictly increasing: {} after {} (index {})", position, previous, k));
    }
    previous = position;
  }
  return count;
}

/// Decompresses the body of an overwrite payload into `out` (reserved to fit) and returns its size.
uint64_t decompress_body(std::span<const uint8_t> payload, PayloadFraming framing, uint64_t tensor_bytes,
                         const std::string& tensor, ScratchBytes& out) {
  const std::string what = overwrite_what(tensor);
  const uint64_t bound = overwrite_bound(tensor_bytes);
  if (framing == PayloadFraming::OneFrame) {
    const uint64_t declared = zstd_declared_size(payload, what);
    if (declared > bound) {
      throw Error(ErrorKind::Format, fmt::format("{}: zstd frame declares {} bytes, beyond the bound of {}", what,
                                                 declared, bound));
    }
    out.reserve(declared);
    zstd_decompress_declared(payload, {out.data(), declared}, what);
    return declared;
  }
  const std::vector<ZstdFrameExtent> frames = zstd_frame_extents(payload, bound, what);
  const uint64_t total = frames.back().content_begin + frames.back().content;
  out.reserve(total);
  // Each frame decodes into its own part of the body, so the frames of a large tensor's body (kOverwriteFrameBytes
  // each) are decoded on several threads; the error reported is the first failing frame's, as a serial decode's.
  std::vector<std::exception_ptr> errors(frames.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < frames.size(); i = next.fetch_add(1)) {
      const ZstdFrameExtent& f = frames[i];
      try {
        zstd_decompress_declared(payload.subspan(f.offset, f.compressed), {out.data() + f.content_begin, f.content},
                                 fmt::format("{}, frame {} at byte {}", what, i, f.offset));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  // Small bodies (every one a fuzzer makes) decode on the calling thread alone: threads cost more than they save.
  const size_t extra_threads =
      total < 2 * kOverwriteFrameBytes
          ? 0
          : std::min<size_t>(frames.size(), std::max(1u, std::thread::hardware_concurrency())) - 1;
  std::vector<std::thread> threads;
  threads.reserve(extra_threads);
  for (size_t t = 0; t < extra_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return total;
}

DecodedDelta decode_overwrite(std::span<const uint8_t> payload, PayloadFraming framing, uint64_t tensor_bytes,
                              const std::string& tensor) {
  ScratchBytes raw;
  const uint64_t size = decompress_body(payload, framing, tensor_bytes, tensor, raw);
  const uint64_t count = validate_overwrite(raw.data(), size, tensor_bytes, tensor);
  DecodedDelta delta;
  delta.encoding = DeltaEncoding::Overwrite;
  delta.tensor_bytes = tensor_bytes;
  delta.positions.resize(count);
  for (uint64_t k = 0; k < count; ++k) delta.positions[k] = get_u32le(raw.data() + 4 + 4 * k);
  delta.values.assign(raw.data() + 4 + 4 * count, raw.data() + size);
  return delta;
}

}  // namespace

DecodedDelta decode_delta(DeltaEncoding encoding, std::span<const uint8_t> payload, uint64_t tensor_bytes,
                          const std::string& tensor) {
  return decode_delta(encoding, PayloadFraming::OneFrame, payload, tensor_bytes, tensor);
}

DecodedDelta decode_delta(DeltaEncoding encoding, PayloadFraming framing, std::span<const uint8_t> payload,
                          uint64_t tensor_bytes, const std::string& tensor) {
  if (encoding == DeltaEncoding::Overwrite) return decode_overwrite(payload, framing, tensor_bytes, tensor);
  DecodedDelta delta;
  delta.encoding = DeltaEncoding::Xor;
  delta.tensor_bytes = tensor_bytes;
  std::string what = fmt::format("xor mask of tensor '{}'", tensor);
  if (framing == PayloadFraming::Frames) {
    const std::vector<ZstdFrameExtent> frames = zstd_frame_extents(payload, tensor_bytes, what);
    const uint64_t total = frames.back().content_begin + frames.back().content;
    if (total != tensor_bytes) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: mask of {} bytes declared, tensor has {} bytes", what, total, tensor_bytes));
    }
    delta.mask.resize(tensor_bytes);
    for (size_t i = 0; i < frames.size(); ++i) {
      const ZstdFrameExtent& f = frames[i];
      zstd_decompress_exact(payload.subspan(f.offset, f.compressed),
                            std::span<uint8_t>(delta.mask).subspan(f.content_begin, f.content),
                            fmt::format("{}, frame {} at byte {}", what, i, f.offset));
    }
    return delta;
  }
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

void OverwriteBody::decode(std::span<const uint8_t> payload, PayloadFraming framing, uint64_t tensor_bytes,
                           const std::string& tensor) {
  count_ = 0;
  const uint64_t size = decompress_body(payload, framing, tensor_bytes, tensor, buffer_);
  count_ = validate_overwrite(buffer_.data(), size, tensor_bytes, tensor);
}

uint32_t OverwriteBody::position(uint64_t i) const { return get_u32le(buffer_.data() + 4 + 4 * i); }

uint64_t OverwriteBody::lower_bound(uint64_t byte) const {
  uint64_t lo = 0, hi = count_;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (position(mid) < byte) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace wsb
