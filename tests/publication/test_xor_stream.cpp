// Streamed xor application: same bytes as decode + apply, every framing error restores the tensor exactly. Pull
// decoding (xor_mask_frames + MaskReader, what the chunked fold reads): the same bytes however the tensor is cut
// and however the payload is framed, and every one-frame error refused with the streamed apply's words.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/store_edit.hpp"

#include <fmt/format.h>

namespace wsb {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

/// A tensor larger than the streaming chunk, and its target with ~1% of the bytes changed.
struct Case {
  std::vector<uint8_t> base = random_bytes(3 * (1 << 18) + 123, 1);
  std::vector<uint8_t> target = [this] {
    auto t = base;
    for (size_t i = 0; i < t.size(); i += 97) t[i] ^= 0x01;
    return t;
  }();
  std::vector<uint8_t> payload = encode_delta(DeltaEncoding::Xor, base, target, 1);
};

/// The message of the Error(Format) applying `payload` to a copy of `base` throws; the copy must be left as it was.
std::string expect_format_error_restores(const std::vector<uint8_t>& payload, const std::vector<uint8_t>& base) {
  auto data = base;
  const std::string message = test::error_message([&] { apply_xor_payload(payload, data, "w"); }, ErrorKind::Format);
  EXPECT_EQ(data, base) << "tensor not restored";
  return message;
}

TEST(XorStream, EqualsDecodeAndApplyAndIsAnInvolution) {
  Case c;
  auto data = c.base;
  apply_xor_payload(c.payload, data, "w");
  EXPECT_EQ(data, c.target);
  auto reference = c.base;
  auto decoded = decode_delta(DeltaEncoding::Xor, c.payload, reference.size(), "w");
  apply_delta_swap(decoded, reference);
  EXPECT_EQ(data, reference);
  apply_xor_payload(c.payload, data, "w");
  EXPECT_EQ(data, c.base);
}

TEST(XorStream, TruncatedFrameRestoresTheTensor) {
  Case c;
  auto truncated = c.payload;
  truncated.resize(truncated.size() * 2 / 3);
  EXPECT_EQ(expect_format_error_restores(truncated, c.base), "xor mask of tensor 'w': truncated zstd frame");
}

TEST(XorStream, TrailingBytesAfterTheFrameAreRejected) {
  Case c;
  auto trailing = c.payload;
  trailing.push_back(0);
  EXPECT_EQ(expect_format_error_restores(trailing, c.base), "xor mask of tensor 'w': 1 bytes after the zstd frame");
}

TEST(XorStream, DeclaredSizeMustEqualTheTensor) {
  Case c;
  auto shorter = c.base;
  shorter.pop_back();
  auto data = shorter;
  EXPECT_EQ(test::error_text([&] { apply_xor_payload(c.payload, data, "w"); }),
            fmt::format("xor mask of tensor 'w': mask of {} bytes declared, tensor has {} bytes", c.base.size(),
                        shorter.size()));
  EXPECT_EQ(data, shorter);
}

TEST(XorStream, CorruptedFrameIsCaughtOrDetectableAndNeverPartial) {
  Case c;
  auto corrupt = c.payload;
  corrupt[corrupt.size() / 2] ^= 0x5A;
  auto data = c.base;
  try {
    apply_xor_payload(corrupt, data, "w");
    // A corruption that still decodes yields another mask of the right size: the checksum catches it later.
    EXPECT_NE(data, c.target);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_EQ(data, c.base);
  }
}

/// Applies `payload` (framed as `framing`) to a copy of `base` through xor_mask_frames and a MaskReader, `chunk`
/// bytes per read, then finish(); a reader's error is thrown as Error(Format) "xor mask of tensor 'w': ...".
std::vector<uint8_t> pulled(const std::vector<uint8_t>& payload, PayloadFraming framing,
                            const std::vector<uint8_t>& base, size_t chunk) {
  std::vector<uint8_t> data = base;
  const std::vector<ZstdFrameExtent> frames = xor_mask_frames(payload, framing, data.size(), "w");
  MaskReader reader;
  reader.open(payload, frames, data.size(), 0);
  std::vector<uint8_t> piece(chunk);
  const auto check = [](const std::string& error) {
    if (!error.empty()) throw_xor_mask_error("w", error);
  };
  for (size_t at = 0; at < data.size(); at += chunk) {
    const size_t n = std::min(chunk, data.size() - at);
    check(reader.read({piece.data(), n}));
    xor_into(data.data() + at, piece.data(), n);
  }
  check(reader.finish());
  return data;
}

std::string streamed_error(const std::vector<uint8_t>& payload, const std::vector<uint8_t>& base) {
  auto data = base;
  return test::error_message([&] { apply_xor_payload(payload, data, "w"); }, ErrorKind::Format);
}

TEST(XorMaskPull, EqualsTheTargetForEveryChunkingAndFraming) {
  Case c;
  const std::vector<uint8_t> framed = encode_delta(DeltaEncoding::Xor, c.base, c.target, 1, 40960);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 18, (size_t{1} << 18) + 5, c.base.size()}) {
    EXPECT_EQ(pulled(c.payload, PayloadFraming::OneFrame, c.base, chunk), c.target) << "chunk " << chunk;
    EXPECT_EQ(pulled(framed, PayloadFraming::Frames, c.base, chunk), c.target) << "frames, chunk " << chunk;
  }
  const std::vector<uint8_t> empty;
  EXPECT_EQ(pulled(encode_delta(DeltaEncoding::Xor, empty, empty, 1), PayloadFraming::OneFrame, empty, 1), empty);
}

TEST(XorMaskPull, DeclaredSizeIsCheckedBeforeAnythingIsRead) {
  Case c;
  const uint64_t n = c.base.size();
  EXPECT_EQ(test::error_message([&] { xor_mask_frames(c.payload, PayloadFraming::OneFrame, n - 1, "w"); },
                                ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': mask of {} bytes declared, tensor has {} bytes", n, n - 1));
  const std::vector<uint8_t> framed = encode_delta(DeltaEncoding::Xor, c.base, c.target, 1, 40960);
  EXPECT_EQ(test::error_message([&] { xor_mask_frames(framed, PayloadFraming::Frames, n + 1, "w"); },
                                ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': mask of {} bytes declared, tensor has {} bytes", n, n + 1));
  std::vector<uint8_t> not_zstd = c.payload;
  not_zstd[0] ^= 0xFF;
  EXPECT_EQ(test::error_message([&] { xor_mask_frames(not_zstd, PayloadFraming::OneFrame, n, "w"); },
                                ErrorKind::Format),
            fmt::format("xor mask of tensor 'w': not a zstd frame ({} bytes, magic number absent)", not_zstd.size()));
}

TEST(XorMaskPull, OneFrameErrorsAreTheStreamedApplysWords) {
  Case c;
  std::vector<uint8_t> truncated = c.payload;
  truncated.resize(truncated.size() * 2 / 3);
  EXPECT_EQ(test::error_message([&] { pulled(truncated, PayloadFraming::OneFrame, c.base, 4096); }, ErrorKind::Format),
            "xor mask of tensor 'w': truncated zstd frame");
  EXPECT_EQ(streamed_error(truncated, c.base), "xor mask of tensor 'w': truncated zstd frame");
  std::vector<uint8_t> trailing = c.payload;
  trailing.push_back(0);
  EXPECT_EQ(test::error_message([&] { pulled(trailing, PayloadFraming::OneFrame, c.base, 4096); }, ErrorKind::Format),
            "xor mask of tensor 'w': 1 bytes after the zstd frame");
  EXPECT_EQ(streamed_error(trailing, c.base), "xor mask of tensor 'w': 1 bytes after the zstd frame");
  // Declares the tensor's size, then runs on in RLE blocks.
  const uint64_t n = 300000;
  const std::vector<uint8_t> bomb = test::ZstdFrameBuilder(n).rle(0, 64 << 20).finish();
  const std::vector<uint8_t> base(n, 0x11);
  const std::string expected = "xor mask of tensor 'w': corrupt zstd frame (Destination buffer is too small)";
  EXPECT_EQ(test::error_message([&] { pulled(bomb, PayloadFraming::OneFrame, base, 1 << 20); }, ErrorKind::Format),
            expected);
  EXPECT_EQ(streamed_error(bomb, base), expected);
}

TEST(XorMaskPull, RawBlocksOfExactlyTheTensorDecodeByteForByte) {
  const std::vector<uint8_t> mask = random_bytes(200000, 3);
  const std::vector<uint8_t> frame = test::ZstdFrameBuilder(mask.size()).raw(mask).finish();
  const std::vector<uint8_t> zeros(mask.size(), 0);
  EXPECT_EQ(pulled(frame, PayloadFraming::OneFrame, zeros, 1000), mask);
}

TEST(XorInto, EqualsTheBytewiseXorForEveryLengthAndMisalignment) {
  // Masks with all-zero blocks, partly non-zero blocks and tails shorter than the 32-byte step.
  const std::vector<uint8_t> base = random_bytes(1024, 7);
  std::vector<uint8_t> mask(1024, 0);
  for (size_t i = 0; i < mask.size(); ++i) {
    if ((i / 64) % 3 == 1 || i % 211 == 0) mask[i] = static_cast<uint8_t>(i * 37 + 1);
  }
  for (size_t offset : {0, 1, 13, 63}) {
    for (size_t n : {0, 1, 63, 64, 65, 127, 128, 300, 900}) {
      std::vector<uint8_t> out(base.begin() + offset, base.begin() + offset + n);
      xor_into(out.data(), mask.data() + offset, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], static_cast<uint8_t>(base[offset + i] ^ mask[offset + i]))
            << "offset " << offset << ", n " << n << ", byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace wsb
