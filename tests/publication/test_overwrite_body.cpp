// OverwriteBody: the overwrite payload decoded into reusable scratch gives decode_delta's positions and values
// and refuses exactly what decode_delta refuses, with the same texts; its scratch is kept across decodes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/store_edit.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using test::error_text;

Bytes zstd(const Bytes& raw) { return zstd_compress(raw, 3); }

TEST(OverwriteBody, MatchesDecodeDelta) {
  Bytes base(300, 0), target(300, 0);
  for (size_t i = 5; i < 300; i += 37) target[i] = static_cast<uint8_t>(i);
  const Bytes payload = encode_delta(DeltaEncoding::Overwrite, base, target, 1);
  OverwriteBody body;
  body.decode(payload, PayloadFraming::OneFrame, 300, "w");
  const DecodedDelta d = decode_delta(DeltaEncoding::Overwrite, payload, 300, "w");
  ASSERT_EQ(body.count(), d.positions.size());
  ASSERT_EQ(body.count(), 8u);  // 5, 42, ..., 264
  for (uint64_t k = 0; k < body.count(); ++k) {
    EXPECT_EQ(body.position(k), d.positions[k]);
    EXPECT_EQ(body.values()[k], d.values[k]);
  }
  EXPECT_EQ(body.lower_bound(0), 0u);
  EXPECT_EQ(body.lower_bound(5), 0u);
  EXPECT_EQ(body.lower_bound(6), 1u);
  EXPECT_EQ(body.lower_bound(42), 1u);
  EXPECT_EQ(body.lower_bound(265), 8u);
  // Scratch is kept: a smaller body decodes into the same capacity.
  const size_t held = body.held_bytes();
  EXPECT_EQ(held, 4u + 5u * 8u);
  target = base;
  target[7] = 1;
  body.decode(encode_delta(DeltaEncoding::Overwrite, base, target, 1), PayloadFraming::Frames, 300, "w");
  EXPECT_EQ(body.count(), 1u);
  EXPECT_EQ(body.position(0), 7u);
  EXPECT_EQ(body.values()[0], 1);
  EXPECT_EQ(body.held_bytes(), held);
}

// A body longer than kOverwriteFrameBytes is written as frames of kOverwriteFrameBytes content bytes when frames
// are asked for, decodes (on several threads) to exactly the one-frame body, and a corrupt frame is named as a
// serial decode names it: the first failing frame.
TEST(OverwriteBody, FramedBodyDecodesOnSeveralThreadsToTheOneFrameBody) {
  const size_t size = 3 << 20;  // every other byte changes: count 1.5 Mi, body 4 + 5 * 1.5 Mi bytes = 2 frames
  Bytes base(size, 0), target(size, 0);
  for (size_t i = 1; i < size; i += 2) target[i] = static_cast<uint8_t>(i);  // odd, never 0
  const Bytes one = encode_delta(DeltaEncoding::Overwrite, base, target, 1, 0);
  const Bytes framed = encode_delta(DeltaEncoding::Overwrite, base, target, 1, 32 << 20);
  const uint64_t body_bytes = 4 + 5 * (size / 2);
  const auto frames = zstd_frame_extents(framed, body_bytes, "w");
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].content, kOverwriteFrameBytes);
  EXPECT_EQ(frames[1].content, body_bytes - kOverwriteFrameBytes);
  EXPECT_EQ(zstd_frame_extents(one, body_bytes, "w").size(), 1u);
  OverwriteBody a, b;
  a.decode(one, PayloadFraming::OneFrame, size, "w");
  b.decode(framed, PayloadFraming::Frames, size, "w");
  ASSERT_EQ(a.count(), size / 2);
  ASSERT_EQ(b.count(), a.count());
  for (uint64_t k = 0; k < a.count(); ++k) {
    ASSERT_EQ(b.position(k), a.position(k)) << k;
    ASSERT_EQ(b.values()[k], a.values()[k]) << k;
  }
  // The second frame replaced by raw blocks one byte short of what it declares (its blocks walk, so only its
  // decode fails): the error names "frame 1 at byte <offset>", as a serial decode would.
  const Bytes body = zstd_decompress_bounded(one, body_bytes, "w");
  const Bytes shorter = test::ZstdFrameBuilder(frames[1].content)
                            .raw(std::span<const uint8_t>(body).subspan(kOverwriteFrameBytes, frames[1].content - 1))
                            .finish();
  Bytes bad(framed.begin(), framed.begin() + static_cast<std::ptrdiff_t>(frames[1].offset));
  bad.insert(bad.end(), shorter.begin(), shorter.end());
  const std::string text = error_text([&] { b.decode(bad, PayloadFraming::Frames, size, "w"); });
  EXPECT_NE(text.find(fmt::format("overwrite delta of tensor 'w', frame 1 at byte {}: ", frames[1].offset)),
            std::string::npos)
      << text;
  EXPECT_EQ(b.count(), 0u);
}

TEST(OverwriteBody, RefusesWhatDecodeDeltaRefuses) {
  const std::vector<Bytes> payloads = {
      zstd({5, 0, 0, 0, 1, 0, 0, 0}),
      zstd({2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 9, 9}),
      zstd({2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 9, 9}),
      zstd({1, 0, 0, 0, 16, 0, 0, 0, 9}),
      zstd({1, 0, 0, 0, 2, 0, 0, 0, 0x55, 0x66}),
      zstd({1, 0}),
      Bytes{1, 2, 3, 4, 5},
      zstd(Bytes(200, 0)),  // declares more than the bound 4 + 5 * 16
  };
  for (const Bytes& p : payloads) {
    OverwriteBody body;
    const std::string got = error_text([&] { body.decode(p, PayloadFraming::OneFrame, 16, "lm_head.weight"); });
    EXPECT_EQ(got, error_text([&] { decode_delta(DeltaEncoding::Overwrite, p, 16, "lm_head.weight"); }));
    EXPECT_NE(got, "");
    EXPECT_EQ(body.count(), 0u);
  }
  OverwriteBody body;
  EXPECT_EQ(error_text([&] { body.decode(zstd(Bytes(200, 0)), PayloadFraming::OneFrame, 16, "x"); }),
            "overwrite delta of tensor 'x': zstd frame declares 200 bytes, beyond the bound of 84");
  // Two frames under "zstd-frames" concatenate into one body; under "zstd" the second is trailing bytes.
  Bytes two = zstd({1, 0, 0, 0, 3, 0});
  const Bytes rest = zstd({0, 0, 7});
  two.insert(two.end(), rest.begin(), rest.end());
  body.decode(two, PayloadFraming::Frames, 16, "x");
  ASSERT_EQ(body.count(), 1u);
  EXPECT_EQ(body.position(0), 3u);
  EXPECT_EQ(body.values()[0], 7);
  EXPECT_EQ(error_text([&] { body.decode(two, PayloadFraming::OneFrame, 16, "x"); }),
            error_text([&] { decode_delta(DeltaEncoding::Overwrite, two, 16, "x"); }));
}

}  // namespace
}  // namespace wsb
