#include "publication/xor_stream.hpp"

#include <zstd.h>

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/errors.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {
namespace {

constexpr size_t kChunk = 1 << 18;  // fits L2 with the tensor bytes it is xored into

struct DStreamFree {
  void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
};

/// The decoder's output chunk, one per thread and reused across the thousands of tensors an update applies: no
/// allocation and zero-fill per tensor (and, under ASan, whose allocator maps every block above 128 KiB afresh,
/// no 64 page faults per tensor). Re-entry from a progress callback is harmless: the chunk's bytes are xored into
/// the tensor before the callback runs, and zstd's default (buffered) output mode never reads the output back.
uint8_t* chunk_buffer() {
  thread_local std::vector<uint8_t> chunk(kChunk);
  return chunk.data();
}

/// Streams the frame, xoring at most `limit` output bytes into data. Returns bytes xored; sets `error` (and stops)
/// on a framing violation.
size_t stream_xor(std::span<const uint8_t> payload, std::span<uint8_t> data, size_t limit, std::string& error,
                  const XorProgress* progress) {
  std::unique_ptr<ZSTD_DStream, DStreamFree> stream(ZSTD_createDStream());
  ZSTD_initDStream(stream.get());
  uint8_t* const chunk = chunk_buffer();
  ZSTD_inBuffer in{payload.data(), payload.size(), 0};
  size_t produced = 0;
  size_t ret = 1;
  while (ret != 0) {
    ZSTD_outBuffer out{chunk, kChunk, 0};
    ret = ZSTD_decompressStream(stream.get(), &out, &in);
    if (ZSTD_isError(ret)) {
      error = fmt::format("corrupt zstd frame ({})", ZSTD_getErrorName(ret));
      return produced;
    }
    if (produced + out.pos > data.size()) {
      error = fmt::format("mask longer than the tensor's {} bytes", data.size());
      return produced;
    }
    const size_t take = std::min(out.pos, limit - std::min(limit, produced));
    xor_into(data.data() + produced, chunk, take);
    produced += take;
    if (progress != nullptr && take > 0) (*progress)(produced);
    if (take < out.pos) return produced;  // reverting: stop at the limit
    if (ret != 0 && in.pos == in.size && out.pos < out.size) {
      error = "truncated zstd frame";
      return produced;
    }
  }
  if (in.pos != in.size) error = fmt::format("{} bytes after the zstd frame", in.size - in.pos);
  else if (produced != data.size()) error = fmt::format("mask of {} bytes, tensor has {} bytes", produced, data.size());
  return produced;
}

}  // namespace

void xor_into(uint8_t* out, const uint8_t* mask, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {  // word at a time; memcpy keeps it alignment- and aliasing-safe
    uint64_t a, b;
    std::memcpy(&a, out + i, 8);
    std::memcpy(&b, mask + i, 8);
    a ^= b;
    std::memcpy(out + i, &a, 8);
  }
  for (; i < n; ++i) out[i] ^= mask[i];
}

void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor) {
  apply_xor_payload(payload, data, tensor, XorProgress{});
}

void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor,
                       const XorProgress& progress) {
  const std::string what = fmt::format("xor mask of tensor '{}'", tensor);
  const uint64_t declared = zstd_declared_size(payload, what);  // header first: refuse a wrong size up front
  if (declared != data.size()) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: mask of {} bytes declared, tensor has {} bytes", what, declared, data.size()));
  }
  std::string error;
  const size_t applied = stream_xor(payload, data, data.size(), error, progress ? &progress : nullptr);
  if (!error.empty()) {
    std::string ignored;  // the prefix decodes identically: xoring it again restores the tensor
    stream_xor(payload, data, applied, ignored, nullptr);
    throw Error(ErrorKind::Format, fmt::format("{}: {}", what, error));
  }
}

}  // namespace wsb
