#include "publication/xor_mask_reader.hpp"

#include <zstd.h>

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/errors.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {
namespace {

// Mask bytes decoded at a time: small enough to stay in L2 beside the tensor bytes they are xored into.
constexpr size_t kMaskChunk = 1 << 18;

struct DStreamFree {
  void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
};

}  // namespace

struct XorMaskReader::Impl {
  std::string what;
  uint64_t size = 0;
  std::unique_ptr<ZSTD_DStream, DStreamFree> stream;
  ZSTD_inBuffer in{};
  size_t last_ret = 1;     // ZSTD_decompressStream's last result: 0 once the frame is complete
  uint64_t produced = 0;   // mask bytes decoded so far
  std::vector<uint8_t> chunk;
  size_t ready_begin = 0;  // decoded bytes of `chunk` not yet handed out: [ready_begin, ready_end)
  size_t ready_end = 0;

  [[noreturn]] void fail(const std::string& reason) const {
    throw Error(ErrorKind::Format, fmt::format("{}: {}", what, reason));
  }

  /// One decoder call into the whole chunk, with apply_xor_payload's output window and framing rules, so both
  /// decoders refuse a bad frame with the same words at the same point.
  void refill() {
    ZSTD_outBuffer out{chunk.data(), chunk.size(), 0};
    last_ret = ZSTD_decompressStream(stream.get(), &out, &in);
    if (ZSTD_isError(last_ret)) fail(fmt::format("corrupt zstd frame ({})", ZSTD_getErrorName(last_ret)));
    if (produced + out.pos > size) fail(fmt::format("mask longer than the tensor's {} bytes", size));
    produced += out.pos;
    ready_begin = 0;
    ready_end = out.pos;
    if (last_ret != 0 && in.pos == in.size && out.pos < out.size) fail("truncated zstd frame");
  }
};

XorMaskReader::XorMaskReader(std::span<const uint8_t> payload, uint64_t tensor_bytes, std::string tensor)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.what = fmt::format("xor mask of tensor '{}'", tensor);
  m.size = tensor_bytes;
  const uint64_t declared = zstd_declared_size(payload, m.what);  // header first: refuse a wrong size up front
  if (declared != tensor_bytes) {
    m.fail(fmt::format("mask of {} bytes declared, tensor has {} bytes", declared, tensor_bytes));
  }
  m.stream.reset(ZSTD_createDStream());
  ZSTD_initDStream(m.stream.get());
  m.in = ZSTD_inBuffer{payload.data(), payload.size(), 0};
  m.chunk.resize(kMaskChunk);
}

XorMaskReader::~XorMaskReader() = default;
XorMaskReader::XorMaskReader(XorMaskReader&&) noexcept = default;
XorMaskReader& XorMaskReader::operator=(XorMaskReader&&) noexcept = default;

void XorMaskReader::apply(std::span<uint8_t> data) {
  Impl& m = *impl_;
  if (data.size() > m.size - position_) {
    m.fail(fmt::format("{} bytes asked at offset {} of a {} byte mask", data.size(), position_, m.size));
  }
  size_t done = 0;
  while (done < data.size()) {
    if (m.ready_begin == m.ready_end) {
      if (m.last_ret == 0) m.fail(fmt::format("mask of {} bytes, tensor has {} bytes", m.produced, m.size));
      m.refill();
      continue;
    }
    const size_t take = std::min(m.ready_end - m.ready_begin, data.size() - done);
    xor_into(data.data() + done, m.chunk.data() + m.ready_begin, take);
    m.ready_begin += take;
    done += take;
  }
  position_ += data.size();
}

void XorMaskReader::finish() {
  Impl& m = *impl_;
  if (position_ != m.size) m.fail(fmt::format("mask read to {} of {} bytes", position_, m.size));
  // Every declared byte was handed out; the frame must now end (its last block header or checksum may still be
  // unread) without producing anything more.
  while (m.last_ret != 0) m.refill();
  if (m.in.pos != m.in.size) m.fail(fmt::format("{} bytes after the zstd frame", m.in.size - m.in.pos));
}

}  // namespace wsb
