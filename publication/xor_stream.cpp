#include "publication/xor_stream.hpp"

#include <zstd.h>

#include <fmt/format.h>

#include <algorithm>
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
  // Four independent 64-bit words per iteration (the compiler widens them to vector registers); memcpy keeps the
  // loads alignment- and aliasing-safe. Every line is written, changed or not: skipping the lines of an all-zero
  // mask block (fewer write-backs for a sparse delta) made a two-thread prepare of a sparse llama layer 35% slower.
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t a[4], b[4];
    std::memcpy(a, out + i, 32);
    std::memcpy(b, mask + i, 32);
    for (int k = 0; k < 4; ++k) a[k] ^= b[k];
    std::memcpy(out + i, a, 32);
  }
  for (; i < n; ++i) out[i] ^= mask[i];
}

void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor) {
  apply_xor_payload(payload, data, tensor, XorProgress{});
}

void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor,
                       const XorProgress& progress) {
  xor_mask_frames(payload, PayloadFraming::OneFrame, data.size(), tensor);  // header first: refuse a wrong size
  std::string error;
  const size_t applied = stream_xor(payload, data, data.size(), error, progress ? &progress : nullptr);
  if (!error.empty()) {
    std::string ignored;  // the prefix decodes identically: xoring it again restores the tensor
    stream_xor(payload, data, applied, ignored, nullptr);
    throw_xor_mask_error(tensor, error);
  }
}

void throw_xor_mask_error(const std::string& tensor, const std::string& reason) {
  throw Error(ErrorKind::Format, fmt::format("xor mask of tensor '{}': {}", tensor, reason));
}

std::vector<ZstdFrameExtent> xor_mask_frames(std::span<const uint8_t> payload, PayloadFraming framing,
                                             uint64_t tensor_bytes, const std::string& tensor) {
  const std::string what = fmt::format("xor mask of tensor '{}'", tensor);
  std::vector<ZstdFrameExtent> frames;
  uint64_t declared = 0;
  if (framing == PayloadFraming::OneFrame) {
    declared = zstd_declared_size(payload, what);  // header first: refuse a wrong size up front
  } else {
    frames = zstd_frame_extents(payload, tensor_bytes, what);
    declared = frames.back().content_begin + frames.back().content;
  }
  if (declared != tensor_bytes) {
    throw_xor_mask_error(tensor,
                         fmt::format("mask of {} bytes declared, tensor has {} bytes", declared, tensor_bytes));
  }
  return frames;
}

struct MaskReader::Impl {
  std::unique_ptr<ZSTD_DStream, DStreamFree> stream{ZSTD_createDStream()};
  std::span<const uint8_t> payload;
  std::span<const ZstdFrameExtent> frames;  ///< empty: one frame
  uint64_t total = 0;
  size_t frame = 0;       ///< frame being read (multi-frame)
  uint64_t position = 0;  ///< next mask byte
  uint64_t frame_end = 0;  ///< mask byte where the frame being read ends
  bool frame_open = false;  ///< zstd has not yet reported the frame's end
  ZSTD_inBuffer in{};

  std::string where() const {
    return frames.empty() ? std::string() : fmt::format("frame {} at byte {}: ", frame, frames[frame].offset);
  }
  void start_frame() {
    ZSTD_DCtx_reset(stream.get(), ZSTD_reset_session_only);
    if (frames.empty()) {
      in = ZSTD_inBuffer{payload.data(), payload.size(), 0};
      frame_end = total;
    } else {
      const ZstdFrameExtent& f = frames[frame];
      in = ZSTD_inBuffer{payload.data() + f.offset, f.compressed, 0};
      frame_end = f.content_begin + f.content;
    }
    frame_open = true;
  }
  /// The current frame produced all it declared: zstd must end it there, with nothing more to output.
  std::string end_frame() {
    uint8_t probe[64];
    while (frame_open) {
      ZSTD_outBuffer out{probe, sizeof probe, 0};
      const size_t ret = ZSTD_decompressStream(stream.get(), &out, &in);
      if (ZSTD_isError(ret)) return where() + fmt::format("corrupt zstd frame ({})", ZSTD_getErrorName(ret));
      if (out.pos > 0) {
        return frames.empty() ? fmt::format("mask longer than the tensor's {} bytes", total)
                              : where() + fmt::format("frame produces more than the {} bytes it declares",
                                                      frames[frame].content);
      }
      if (ret == 0) {
        frame_open = false;
        break;
      }
      if (in.pos == in.size) return where() + "truncated zstd frame";
    }
    if (frames.empty() && in.pos != in.size) return fmt::format("{} bytes after the zstd frame", in.size - in.pos);
    return {};
  }
};

MaskReader::MaskReader() : impl_(std::make_unique<Impl>()) {
  if (!impl_->stream) throw std::bad_alloc();
}
MaskReader::~MaskReader() = default;
MaskReader::MaskReader(MaskReader&&) noexcept = default;
MaskReader& MaskReader::operator=(MaskReader&&) noexcept = default;

void MaskReader::open(std::span<const uint8_t> payload, std::span<const ZstdFrameExtent> frames, uint64_t total,
                      uint64_t begin) {
  Impl& m = *impl_;
  m.payload = payload;
  m.frames = frames;
  m.total = total;
  m.position = begin;
  m.frame = 0;
  if (!frames.empty()) {
    // Frames are few (one per tens of MiB): a linear search costs nothing next to decoding one.
    while (m.frame + 1 < frames.size() && frames[m.frame].content_begin + frames[m.frame].content <= begin) ++m.frame;
  }
  m.start_frame();
}

std::string MaskReader::read(std::span<uint8_t> out) {
  Impl& m = *impl_;
  size_t filled = 0;
  while (filled < out.size()) {
    if (m.position == m.frame_end) {
      // The frame has produced all it declared: it must end here; the next one takes over.
      if (std::string error = m.end_frame(); !error.empty()) return error;
      if (m.frames.empty() || m.frame + 1 >= m.frames.size()) {
        return fmt::format("mask of {} bytes, tensor has {} bytes", m.position, m.position + (out.size() - filled));
      }
      ++m.frame;
      m.start_frame();
      continue;
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(out.size() - filled, m.frame_end - m.position));
    ZSTD_outBuffer ob{out.data() + filled, want, 0};
    const size_t ret = ZSTD_decompressStream(m.stream.get(), &ob, &m.in);
    if (ZSTD_isError(ret)) return m.where() + fmt::format("corrupt zstd frame ({})", ZSTD_getErrorName(ret));
    filled += ob.pos;
    m.position += ob.pos;
    if (ret == 0) {
      m.frame_open = false;
      if (m.position != m.frame_end) {
        return m.frames.empty() ? fmt::format("mask of {} bytes, tensor has {} bytes", m.position, m.total)
                                : m.where() + fmt::format("frame ends after {} of the {} bytes it declares",
                                                          m.position - m.frames[m.frame].content_begin,
                                                          m.frames[m.frame].content);
      }
    } else if (ob.pos == 0 && m.in.pos == m.in.size) {
      return m.where() + "truncated zstd frame";
    }
  }
  return {};
}

std::string MaskReader::finish() {
  Impl& m = *impl_;
  if (m.position != m.frame_end) return {};  // mid-frame: a later segment's reader continues from a frame start
  return m.end_frame();
}

}  // namespace wsb
