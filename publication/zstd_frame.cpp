#include "publication/zstd_frame.hpp"

#include <zstd.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// Output grows by this much at a time, so a frame that lies about its size costs at most one step extra.
constexpr size_t kGrowStep = size_t{1} << 20;
// zstd's default decoder window limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27, in zstd.h's experimental section).
// Its streaming decoder enforces it, its one-shot decoder does not, so apply_xor_payload refused mid-stream
// ("corrupt zstd frame") what decode_delta accepted; checking it in the header gives every decoder one rule.
constexpr uint64_t kMaxWindowBytes = uint64_t{1} << 27;

/// Window size a frame header asks for (RFC 8878 section 3.1.1.1): Frame_Content_Size for a single-segment
/// frame, otherwise from Window_Descriptor. `frame` holds a complete header (the content size was read).
uint64_t frame_window_size(std::span<const uint8_t> frame, uint64_t content_size) {
  const uint8_t descriptor = frame[4];
  if (descriptor & 0x20) return content_size;  // Single_Segment_flag
  const uint8_t window = frame[5];
  const uint64_t base = uint64_t{1} << (10 + (window >> 3));
  return base + base / 8 * (window & 7);
}

/// Checks the magic number and returns the declared content size (RFC 8878 section 3.1.1).
uint64_t declared_content_size(std::span<const uint8_t> frame, const std::string& what) {
  uint32_t magic = 0;
  if (frame.size() >= 4) {
    magic = static_cast<uint32_t>(frame[0]) | static_cast<uint32_t>(frame[1]) << 8 |
            static_cast<uint32_t>(frame[2]) << 16 | static_cast<uint32_t>(frame[3]) << 24;
  }
  if (magic != ZSTD_MAGICNUMBER) {
    throw Error(ErrorKind::Format, fmt::format("{}: not a zstd frame ({} bytes, magic number absent)", what,
                                               frame.size()));
  }
  unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: truncated or corrupt zstd frame header ({} bytes)", what, frame.size()));
  }
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    throw Error(ErrorKind::Format, fmt::format("{}: zstd frame does not declare its content size", what));
  }
  const uint64_t window = frame_window_size(frame, declared);
  if (window > kMaxWindowBytes) {
    throw Error(ErrorKind::Format, fmt::format("{}: zstd frame window of {} bytes exceeds the decoder limit of {} "
                                               "bytes (windowLog 27)",
                                               what, window, kMaxWindowBytes));
  }
  return declared;
}

/// Checks that the frame is complete and that nothing follows it.
void check_frame_extent(std::span<const uint8_t> frame, const std::string& what) {
  size_t frame_size = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_size)) {
    throw Error(ErrorKind::Format, fmt::format("{}: truncated or corrupt zstd frame ({} bytes: {})", what,
                                               frame.size(), ZSTD_getErrorName(frame_size)));
  }
  if (frame_size != frame.size()) {
    throw Error(ErrorKind::Format, fmt::format("{}: {} trailing bytes after the zstd frame of {} bytes", what,
                                               frame.size() - frame_size, frame_size));
  }
}

std::unique_ptr<ZSTD_DCtx, DCtxDeleter> make_dctx() {
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  return dctx;
}

}  // namespace

struct ZstdFrameEncoder::Impl {
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx;
  uint64_t pledged = 0;
  uint64_t fed = 0;
  std::vector<uint8_t> out;
  size_t filled = 0;

  /// Runs one compressStream2 step until `in` is consumed (continue) or the frame is closed (end).
  void drive(ZSTD_inBuffer& in, ZSTD_EndDirective mode) {
    for (;;) {
      if (out.size() - filled < ZSTD_CStreamOutSize()) out.resize(filled + ZSTD_CStreamOutSize());
      ZSTD_outBuffer ob{out.data(), out.size(), filled};
      size_t remaining = ZSTD_compressStream2(cctx.get(), &ob, &in, mode);
      filled = ob.pos;
      if (ZSTD_isError(remaining)) {
        throw Error(ErrorKind::Format, fmt::format("zstd compression failed: {}", ZSTD_getErrorName(remaining)));
      }
      bool done = mode == ZSTD_e_end ? remaining == 0 : in.pos == in.size;
      if (done) return;
    }
  }
};

ZstdFrameEncoder::ZstdFrameEncoder(uint64_t content_size, int level) : impl_(std::make_unique<Impl>()) {
  impl_->cctx.reset(ZSTD_createCCtx());
  if (!impl_->cctx) throw std::bad_alloc();
  impl_->pledged = content_size;
  size_t rc = ZSTD_CCtx_setParameter(impl_->cctx.get(), ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(impl_->cctx.get(), ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setPledgedSrcSize(impl_->cctx.get(), content_size);
  if (ZSTD_isError(rc)) {
    throw Error(ErrorKind::Format, fmt::format("zstd level {}: {}", level, ZSTD_getErrorName(rc)));
  }
}

ZstdFrameEncoder::~ZstdFrameEncoder() = default;

void ZstdFrameEncoder::update(std::span<const uint8_t> piece) {
  if (piece.size() > impl_->pledged - impl_->fed) {
    throw Error(ErrorKind::Format, fmt::format("zstd frame: {} bytes fed beyond the pledged {}",
                                               impl_->fed + piece.size() - impl_->pledged, impl_->pledged));
  }
  impl_->fed += piece.size();
  if (piece.empty()) return;
  ZSTD_inBuffer in{piece.data(), piece.size(), 0};
  impl_->drive(in, ZSTD_e_continue);
}

std::vector<uint8_t> ZstdFrameEncoder::finish() {
  if (impl_->fed != impl_->pledged) {
    throw Error(ErrorKind::Format,
                fmt::format("zstd frame: {} bytes fed, {} pledged", impl_->fed, impl_->pledged));
  }
  ZSTD_inBuffer in{nullptr, 0, 0};
  impl_->drive(in, ZSTD_e_end);
  impl_->out.resize(impl_->filled);
  impl_->out.shrink_to_fit();
  return std::move(impl_->out);
}

namespace {

/// Streams `frame` (declaring `declared` content bytes) through `dctx` into the buffer room(filled) returns (it
/// may grow it; never beyond `declared` bytes), so no decode writes more than the frame declares. Returns the bytes
/// decoded (== declared). Throws Error(Format) naming `what` for a corrupt frame, one that produces more or fewer
/// bytes than it declares, or a truncated one.
template <class Room>
size_t stream_frame(ZSTD_DCtx* dctx, std::span<const uint8_t> frame, uint64_t declared, const std::string& what,
                    Room&& room) {
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  size_t filled = 0;
  for (;;) {
    const std::span<uint8_t> out = room(filled);
    ZSTD_outBuffer ob{out.data(), out.size(), filled};
    const size_t in_before = in.pos;
    const size_t hint = ZSTD_decompressStream(dctx, &ob, &in);
    if (ZSTD_isError(hint)) {
      throw Error(ErrorKind::Format, fmt::format("{}: corrupt zstd frame: {}", what, ZSTD_getErrorName(hint)));
    }
    const bool progressed = ob.pos != filled || in.pos != in_before;
    filled = ob.pos;
    if (hint == 0) break;  // frame decoded and flushed
    if (!progressed) {
      // The output is capped at the declared size, so a stall with a full buffer means the frame wants more.
      if (filled == declared) {
        throw Error(ErrorKind::Format,
                    fmt::format("{}: zstd frame produces more than the {} bytes it declares", what, declared));
      }
      throw Error(ErrorKind::Format, fmt::format("{}: truncated zstd frame ({} of {} bytes decoded)", what,
                                                 filled, declared));
    }
  }
  if (filled != declared) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: zstd frame decoded to {} bytes, declares {}", what, filled, declared));
  }
  return filled;
}

}  // namespace

uint64_t zstd_declared_size(std::span<const uint8_t> frame, const std::string& what) {
  return declared_content_size(frame, what);
}

void zstd_decompress_declared(std::span<const uint8_t> frame, std::span<uint8_t> out, const std::string& what) {
  check_frame_extent(frame, what);
  // One decoder per thread, reset per frame: an overwrite body per tensor would otherwise allocate (and fault) a
  // decoder context for each.
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx = make_dctx();
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only);
  stream_frame(dctx.get(), frame, out.size(), what, [&](size_t) { return out; });
}

std::vector<ZstdFrameExtent> zstd_frame_extents(std::span<const uint8_t> payload, uint64_t max_content,
                                                const std::string& what) {
  std::vector<ZstdFrameExtent> frames;
  uint64_t offset = 0;
  uint64_t content = 0;
  do {
    const std::span<const uint8_t> rest = payload.subspan(offset);
    const std::string where = fmt::format("{}, frame {} at byte {}", what, frames.size(), offset);
    const uint64_t declared = declared_content_size(rest, where);
    if (declared > max_content - content) {
      throw Error(ErrorKind::Format, fmt::format("{}: frames declare more than {} bytes ({} up to this one)", where,
                                                 max_content, content + declared));
    }
    const size_t size = ZSTD_findFrameCompressedSize(rest.data(), rest.size());
    if (ZSTD_isError(size)) {
      throw Error(ErrorKind::Format, fmt::format("{}: truncated or corrupt zstd frame ({} bytes left: {})", where,
                                                 rest.size(), ZSTD_getErrorName(size)));
    }
    frames.push_back(ZstdFrameExtent{offset, size, content, declared});
    offset += size;
    content += declared;
  } while (offset < payload.size());
  return frames;
}

std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data, int level) {
  ZstdFrameEncoder encoder(data.size(), level);
  encoder.update(data);
  return encoder.finish();
}

void zstd_decompress_exact(std::span<const uint8_t> frame, std::span<uint8_t> out, const std::string& what) {
  uint64_t declared = declared_content_size(frame, what);
  if (declared != out.size()) {
    throw Error(ErrorKind::Format, fmt::format("{}: zstd frame declares {} bytes, expected {}", what, declared,
                                               out.size()));
  }
  check_frame_extent(frame, what);
  auto dctx = make_dctx();
  // Single-shot decoding writes only inside `out`, so a frame producing more than it declares fails here.
  size_t produced = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(produced)) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: corrupt zstd frame: {}", what, ZSTD_getErrorName(produced)));
  }
  if (produced != out.size()) {
    throw Error(ErrorKind::Format, fmt::format("{}: zstd frame decoded to {} bytes, expected {}", what, produced,
                                               out.size()));
  }
}

std::vector<uint8_t> zstd_decompress_bounded(std::span<const uint8_t> frame, uint64_t max_bytes,
                                             const std::string& what) {
  uint64_t declared = declared_content_size(frame, what);
  if (declared > max_bytes) {
    throw Error(ErrorKind::Format, fmt::format("{}: zstd frame declares {} bytes, beyond the bound of {}", what,
                                               declared, max_bytes));
  }
  check_frame_extent(frame, what);
  auto dctx = make_dctx();
  std::vector<uint8_t> out(std::min<uint64_t>(declared, kGrowStep));
  const size_t filled = stream_frame(dctx.get(), frame, declared, what, [&](size_t at) {
    if (at == out.size() && out.size() < declared) {
      out.resize(std::min<uint64_t>(declared, out.size() + std::max(out.size(), kGrowStep)));
    }
    return std::span<uint8_t>(out);
  });
  out.resize(filled);
  return out;
}

}  // namespace wsb
