// Pull decoding of xor payloads: the same bytes as the streamed apply however the tensor is cut into chunks, and
// every framing error refused with the streamed apply's exact words.
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_mask_reader.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/store_edit.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes random_bytes(size_t n, uint32_t seed) {
  Bytes v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

/// A tensor spanning several decoder chunks (256 KiB) and its target with every 97th byte changed.
struct Case {
  Bytes base = random_bytes(3 * (1 << 18) + 123, 1);
  Bytes target = [this] {
    Bytes t = base;
    for (size_t i = 0; i < t.size(); i += 97) t[i] ^= 0x01;
    return t;
  }();
  Bytes payload = encode_delta(DeltaEncoding::Xor, base, target, 1);
};

/// Applies `payload` to a copy of `base` through a reader, `chunk` bytes per call, then finish().
Bytes pulled(const Bytes& payload, const Bytes& base, size_t chunk) {
  Bytes data = base;
  XorMaskReader reader(payload, data.size(), "w");
  for (size_t at = 0; at < data.size(); at += chunk) {
    reader.apply(std::span<uint8_t>(data).subspan(at, std::min(chunk, data.size() - at)));
  }
  EXPECT_EQ(reader.position(), data.size());
  reader.finish();
  return data;
}

/// What the streamed apply says of `payload` over a copy of `base` (Error(Format)).
std::string streamed_error(const Bytes& payload, const Bytes& base) {
  Bytes data = base;
  return test::error_message([&] { apply_xor_payload(payload, data, "w"); }, ErrorKind::Format);
}

TEST(XorMaskReader, EqualsTheStreamedApplyForEveryChunking) {
  Case c;
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 18, (size_t{1} << 18) + 5, c.base.size()}) {
    EXPECT_EQ(pulled(c.payload, c.base, chunk), c.target) << "chunk " << chunk;
  }
}

TEST(XorMaskReader, EmptyTensor) {
  const Bytes empty;
  const Bytes payload = encode_delta(DeltaEncoding::Xor, empty, empty, 1);
  EXPECT_EQ(pulled(payload, empty, 1), empty);
}

TEST(XorMaskReader, DeclaredSizeIsCheckedAtConstruction) {
  Case c;
  EXPECT_EQ(test::error_message([&] { XorMaskReader(c.payload, c.base.size() - 1, "w"); }, ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': mask of {} bytes declared, tensor has {} bytes", c.base.size(),
                        c.base.size() - 1));
  Bytes not_zstd = c.payload;
  not_zstd[0] ^= 0xFF;
  EXPECT_EQ(test::error_message([&] { XorMaskReader(not_zstd, c.base.size(), "w"); }, ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': not a zstd frame ({} bytes, magic number absent)", not_zstd.size()));
}

TEST(XorMaskReader, TruncatedFrameIsRefusedAsTheStreamedApplyRefusesIt) {
  Case c;
  Bytes truncated = c.payload;
  truncated.resize(truncated.size() * 2 / 3);
  EXPECT_EQ(test::error_message([&] { pulled(truncated, c.base, 4096); }, ErrorKind::Format),
            "xor mask of tensor 'w': truncated zstd frame");
  EXPECT_EQ(streamed_error(truncated, c.base), "xor mask of tensor 'w': truncated zstd frame");
}

TEST(XorMaskReader, TrailingBytesAreRefusedAtFinish) {
  Case c;
  Bytes trailing = c.payload;
  trailing.push_back(0);
  Bytes data = c.base;
  XorMaskReader reader(trailing, data.size(), "w");
  reader.apply(data);  // every mask byte is there
  EXPECT_EQ(data, c.target);
  EXPECT_EQ(test::error_message([&] { reader.finish(); }, ErrorKind::Format),
            "xor mask of tensor 'w': 1 bytes after the zstd frame");
  EXPECT_EQ(streamed_error(trailing, c.base), "xor mask of tensor 'w': 1 bytes after the zstd frame");
}

TEST(XorMaskReader, FrameProducingMoreThanItDeclaresIsRefused) {
  // Declares the tensor's size, then runs on in RLE blocks: the streamed apply's words for it.
  const uint64_t n = 300000;
  const Bytes bomb = test::ZstdFrameBuilder(n).rle(0, 64 << 20).finish();
  const Bytes base(n, 0x11);
  const std::string expected = "xor mask of tensor 'w': corrupt zstd frame (Destination buffer is too small)";
  EXPECT_EQ(test::error_message([&] { pulled(bomb, base, 1 << 20); }, ErrorKind::Format), expected);
  EXPECT_EQ(streamed_error(bomb, base), expected);
}

TEST(XorMaskReader, RawBlocksOfExactlyTheTensorDecodeByteForByte) {
  const Bytes mask = random_bytes(200000, 3);
  const Bytes frame = test::ZstdFrameBuilder(mask.size()).raw(mask).finish();
  const Bytes zeros(mask.size(), 0);
  EXPECT_EQ(pulled(frame, zeros, 1000), mask);
}

TEST(XorMaskReader, AskingPastTheMaskOrFinishingEarlyIsAnError) {
  Case c;
  Bytes data = c.base;
  XorMaskReader reader(c.payload, data.size(), "w");
  reader.apply(std::span<uint8_t>(data).first(100));
  EXPECT_EQ(test::error_message([&] { reader.finish(); }, ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': mask read to 100 of {} bytes", data.size()));
  Bytes more(data.size(), 0);
  EXPECT_EQ(test::error_message([&] { reader.apply(more); }, ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': {} bytes asked at offset 100 of a {} byte mask", data.size(),
                        data.size()));
}

}  // namespace
}  // namespace wsb
