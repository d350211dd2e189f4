// The "zstd-frames" framing: payloads of consecutive frames (extents walked exactly, every framing error named with
// its frame), encode_delta's split into frames, decode_delta and MaskReader reading them, and the one-frame rules
// MaskReader keeps for "zstd" payloads.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using test::error_message;

Bytes random_bytes(size_t n, uint32_t seed) {
  Bytes v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

/// A base and a target that differs in every 97th byte.
struct Pair {
  Bytes base, target;
  explicit Pair(size_t n) : base(random_bytes(n, 1)), target(base) {
    for (size_t i = 0; i < n; i += 97) target[i] ^= 0x01;
  }
  Bytes mask() const {
    Bytes m(base.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = base[i] ^ target[i];
    return m;
  }
};

TEST(ZstdFrames, CompressionFormatNames) {
  EXPECT_EQ(compression_format_name(PayloadFraming::OneFrame), "zstd");
  EXPECT_EQ(compression_format_name(PayloadFraming::Frames), "zstd-frames");
  EXPECT_EQ(parse_compression_format("zstd"), PayloadFraming::OneFrame);
  EXPECT_EQ(parse_compression_format("zstd-frames"), PayloadFraming::Frames);
  EXPECT_EQ(parse_compression_format("zstd-seekable"), std::nullopt);
}

TEST(ZstdFrames, EncodeSplitsTheMaskAndExtentsWalkItExactly) {
  const Pair p(10000);
  const Bytes payload = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 4096);
  const auto frames = zstd_frame_extents(payload, 10000, "m");
  ASSERT_EQ(frames.size(), 3u);
  uint64_t offset = 0;
  const uint64_t contents[] = {4096, 4096, 1808};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(frames[i].offset, offset);
    EXPECT_EQ(frames[i].content_begin, 4096 * i);
    EXPECT_EQ(frames[i].content, contents[i]);
    // Each extent is one whole frame of the mask's slice.
    const Bytes one(payload.begin() + static_cast<std::ptrdiff_t>(offset),
                    payload.begin() + static_cast<std::ptrdiff_t>(offset + frames[i].compressed));
    Bytes out(contents[i]);
    zstd_decompress_exact(one, out, "m");
    const Bytes mask = p.mask();
    EXPECT_EQ(out, Bytes(mask.begin() + static_cast<std::ptrdiff_t>(4096 * i),
                         mask.begin() + static_cast<std::ptrdiff_t>(4096 * i + contents[i])));
    offset += frames[i].compressed;
  }
  EXPECT_EQ(offset, payload.size());
  // frame_bytes 0 or beyond the tensor: one frame, the "zstd" payload itself.
  EXPECT_EQ(encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 0), encode_delta(DeltaEncoding::Xor, p.base, p.target, 1));
  EXPECT_EQ(zstd_frame_extents(encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 1 << 20), 10000, "m").size(), 1u);
  // Overwrite bodies stay one frame under both framings.
  EXPECT_EQ(encode_delta(DeltaEncoding::Overwrite, p.base, p.target, 1, 4096),
            encode_delta(DeltaEncoding::Overwrite, p.base, p.target, 1));
}

TEST(ZstdFrames, ExtentErrorsNameTheFrame) {
  const Pair p(10000);
  const Bytes payload = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 4096);
  const auto frames = zstd_frame_extents(payload, 10000, "m");
  // Cut inside frame 2.
  Bytes cut(payload.begin(), payload.end() - 3);
  EXPECT_EQ(error_message([&] { zstd_frame_extents(cut, 10000, "m"); }, ErrorKind::Format),
            "m, frame 2 at byte " + std::to_string(frames[2].offset) + ": truncated or corrupt zstd frame (" +
                std::to_string(cut.size() - frames[2].offset) + " bytes left: Src size is incorrect)");
  // Bytes after the last frame must be another frame.
  Bytes trailing = payload;
  trailing.insert(trailing.end(), {1, 2, 3});
  EXPECT_EQ(error_message([&] { zstd_frame_extents(trailing, 10000, "m"); }, ErrorKind::Format),
            "m, frame 3 at byte " + std::to_string(payload.size()) + ": not a zstd frame (3 bytes, magic number absent)");
  // The declared sizes may not add up beyond the bound: refused at the frame that passes it.
  EXPECT_EQ(error_message([&] { zstd_frame_extents(payload, 9000, "m"); }, ErrorKind::Format),
            "m, frame 2 at byte " + std::to_string(frames[2].offset) +
                ": frames declare more than 9000 bytes (10000 up to this one)");
  EXPECT_EQ(error_message([&] { zstd_frame_extents({}, 10, "m"); }, ErrorKind::Format),
            "m, frame 0 at byte 0: not a zstd frame (0 bytes, magic number absent)");
}

TEST(ZstdFrames, DecodeDeltaReadsFramesAndChecksTheirTotal) {
  const Pair p(10000);
  const Bytes payload = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 4096);
  EXPECT_EQ(decode_delta(DeltaEncoding::Xor, PayloadFraming::Frames, payload, 10000, "w").mask, p.mask());
  EXPECT_EQ(error_message([&] { decode_delta(DeltaEncoding::Xor, PayloadFraming::Frames, payload, 10001, "w"); },
                          ErrorKind::Format),
            "xor mask of tensor 'w': mask of 10000 bytes declared, tensor has 10001 bytes");
  // Under "zstd" the same payload is one frame with bytes after it.
  EXPECT_EQ(error_message([&] { decode_delta(DeltaEncoding::Xor, PayloadFraming::OneFrame, payload, 10000, "w"); },
                          ErrorKind::Format),
            "xor mask of tensor 'w': mask of 4096 bytes declared, tensor has 10000 bytes");
  const Bytes ow = encode_delta(DeltaEncoding::Overwrite, p.base, p.target, 1);
  const DecodedDelta a = decode_delta(DeltaEncoding::Overwrite, PayloadFraming::Frames, ow, 10000, "w");
  const DecodedDelta b = decode_delta(DeltaEncoding::Overwrite, ow, 10000, "w");
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.values, b.values);
  ASSERT_EQ(a.positions.size(), 104u);  // bytes 0, 97, ..., 9991
  EXPECT_EQ(a.positions[1], 97u);
}

/// Reads the whole mask of `payload` in pieces of `piece` bytes, starting at frame `first` (0: the start).
Bytes read_all(const Bytes& payload, const std::vector<ZstdFrameExtent>& frames, uint64_t total, uint64_t begin,
               size_t piece, std::string* error) {
  MaskReader reader;
  reader.open(payload, frames, total, begin);
  Bytes out(total - begin);
  for (size_t at = 0; at < out.size(); at += piece) {
    *error = reader.read({out.data() + at, std::min(piece, out.size() - at)});
    if (!error->empty()) return out;
  }
  *error = reader.finish();
  return out;
}

TEST(ZstdFrames, MaskReaderStartsAtAnyFrameAndCrossesFrames) {
  const Pair p(10000);
  const Bytes mask = p.mask();
  const Bytes payload = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 4096);
  const auto frames = zstd_frame_extents(payload, 10000, "m");
  for (size_t piece : {1, 7, 4096, 10000}) {
    for (uint64_t begin : {0, 4096, 8192}) {
      std::string error;
      EXPECT_EQ(read_all(payload, frames, 10000, begin, piece, &error),
                Bytes(mask.begin() + static_cast<std::ptrdiff_t>(begin), mask.end()))
          << piece << " " << begin;
      EXPECT_EQ(error, "");
    }
  }
  // A reader reused for another payload of one frame ("zstd").
  MaskReader reader;
  reader.open(payload, frames, 10000, 4096);
  Bytes first(100);
  EXPECT_EQ(reader.read(first), "");
  const Bytes single = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1);
  reader.open(single, {}, 10000, 0);
  Bytes all(10000);
  EXPECT_EQ(reader.read(all), "");
  EXPECT_EQ(reader.finish(), "");
  EXPECT_EQ(all, mask);
}

TEST(ZstdFrames, MaskReaderOneFrameErrorsAreApplyXorPayloads) {
  const Pair p(10000);
  const Bytes single = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1);
  std::string error;
  Bytes trailing = single;
  trailing.insert(trailing.end(), {0x28, 0xb5, 0x2f});
  read_all(trailing, {}, 10000, 0, 4096, &error);
  EXPECT_EQ(error, "3 bytes after the zstd frame");
  Bytes truncated(single.begin(), single.begin() + static_cast<std::ptrdiff_t>(single.size() * 2 / 3));
  read_all(truncated, {}, 10000, 0, 4096, &error);
  EXPECT_EQ(error, "truncated zstd frame");
}

TEST(ZstdFrames, MaskReaderNamesTheFrameThatFails) {
  const Pair p(10000);
  Bytes payload = encode_delta(DeltaEncoding::Xor, p.base, p.target, 1, 4096);
  auto frames = zstd_frame_extents(payload, 10000, "m");
  // A frame that declares fewer bytes than its extent says: the reader trusts the extents and finds it short.
  std::vector<ZstdFrameExtent> lying = frames;
  lying[1].content = 5000;
  lying[2].content_begin = 9096;
  lying[2].content = 904;
  std::string error;
  read_all(payload, lying, 10000, 0, 1000, &error);
  EXPECT_EQ(error, "frame 1 at byte " + std::to_string(frames[1].offset) +
                       ": frame ends after 4096 of the 5000 bytes it declares");
  lying = frames;
  lying[1].content = 4000;
  lying[2].content_begin = 8096;
  lying[2].content = 1904;
  read_all(payload, lying, 10000, 0, 1000, &error);
  EXPECT_EQ(error, "frame 1 at byte " + std::to_string(frames[1].offset) +
                       ": frame produces more than the 4000 bytes it declares");
}

}  // namespace
}  // namespace wsb
