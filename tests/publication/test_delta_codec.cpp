// Delta payload codec: round trips, folding, involution and every structural rejection (docs/design.md
// "Publication format": xor / overwrite payloads, one zstd frame declaring its content size).
#include <gtest/gtest.h>
#include <zstd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using test::expect_error;

using Bytes = std::vector<uint8_t>;

/// Runs `fn`, expecting wsb::Error of `kind` whose message contains every one of `parts`.

Bytes zstd(const Bytes& raw) { return zstd_compress(raw, 3); }

/// A hand-built frame (RFC 8878): single segment, 1-byte Frame_Content_Size = `declared`, one last raw block.
Bytes raw_block_frame(uint8_t declared, const Bytes& block) {
  Bytes f{0x28, 0xB5, 0x2F, 0xFD, 0x20, declared};
  uint32_t header = static_cast<uint32_t>(block.size()) << 3 | 1u;  // Last_Block = 1, Block_Type = Raw
  f.push_back(static_cast<uint8_t>(header));
  f.push_back(static_cast<uint8_t>(header >> 8));
  f.push_back(static_cast<uint8_t>(header >> 16));
  f.insert(f.end(), block.begin(), block.end());
  return f;
}

Bytes apply_copy(DeltaEncoding encoding, const Bytes& payload, const Bytes& base, const std::string& name) {
  DecodedDelta delta = decode_delta(encoding, payload, base.size(), name);
  Bytes out = base;
  apply_delta_swap(delta, out);
  return out;
}

TEST(DeltaCodec, EncodingNames) {
  EXPECT_EQ(delta_encoding_name(DeltaEncoding::Xor), "xor");
  EXPECT_EQ(delta_encoding_name(DeltaEncoding::Overwrite), "overwrite");
  EXPECT_EQ(parse_delta_encoding("xor"), DeltaEncoding::Xor);
  EXPECT_EQ(parse_delta_encoding("overwrite"), DeltaEncoding::Overwrite);
  EXPECT_EQ(parse_delta_encoding("XOR"), std::nullopt);
  EXPECT_EQ(parse_delta_encoding(""), std::nullopt);
}

TEST(DeltaCodec, XorRoundTrip) {
  Bytes base{0x00, 0x11, 0x22, 0x33};
  Bytes target{0x00, 0x10, 0x22, 0xFF};
  Bytes payload = encode_delta(DeltaEncoding::Xor, base, target, 1);
  EXPECT_EQ(zstd_declared_size(payload, "p"), 4u);
  DecodedDelta delta = decode_delta(DeltaEncoding::Xor, payload, 4, "t");
  EXPECT_EQ(delta.encoding, DeltaEncoding::Xor);
  EXPECT_EQ(delta.tensor_bytes, 4u);
  EXPECT_EQ(delta.mask, (Bytes{0x00, 0x01, 0x00, 0xCC}));
  EXPECT_TRUE(delta.positions.empty());
  Bytes data = base;
  apply_delta_swap(delta, data);
  EXPECT_EQ(data, target);
}

TEST(DeltaCodec, OverwriteRoundTripAndExactBody) {
  Bytes base{0x00, 0x11, 0x22, 0x33};
  Bytes target{0x00, 0x10, 0x22, 0xFF};
  Bytes payload = encode_delta(DeltaEncoding::Overwrite, base, target, 1);
  // u32 count | u32 positions | u8 values, little-endian.
  EXPECT_EQ(zstd_decompress_bounded(payload, 1000, "p"),
            (Bytes{2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0x10, 0xFF}));
  DecodedDelta delta = decode_delta(DeltaEncoding::Overwrite, payload, 4, "t");
  EXPECT_EQ(delta.positions, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(delta.values, (Bytes{0x10, 0xFF}));
  EXPECT_TRUE(delta.mask.empty());
  EXPECT_EQ(apply_copy(DeltaEncoding::Overwrite, payload, base, "t"), target);
}

TEST(DeltaCodec, EmptyDeltaAndEmptyTensor) {
  Bytes same{7, 7, 7, 7, 7};
  Bytes xor_payload = encode_delta(DeltaEncoding::Xor, same, same, 1);
  EXPECT_EQ(decode_delta(DeltaEncoding::Xor, xor_payload, 5, "t").mask, Bytes(5, 0));
  Bytes ow_payload = encode_delta(DeltaEncoding::Overwrite, same, same, 1);
  EXPECT_EQ(zstd_decompress_bounded(ow_payload, 100, "p"), (Bytes{0, 0, 0, 0}));
  DecodedDelta ow = decode_delta(DeltaEncoding::Overwrite, ow_payload, 5, "t");
  EXPECT_TRUE(ow.positions.empty());
  EXPECT_TRUE(ow.values.empty());
  EXPECT_EQ(apply_copy(DeltaEncoding::Overwrite, ow_payload, same, "t"), same);
  EXPECT_EQ(apply_copy(DeltaEncoding::Xor, xor_payload, same, "t"), same);

  Bytes none;
  Bytes empty_xor = encode_delta(DeltaEncoding::Xor, none, none, 1);
  EXPECT_EQ(zstd_declared_size(empty_xor, "p"), 0u);
  EXPECT_TRUE(decode_delta(DeltaEncoding::Xor, empty_xor, 0, "t").mask.empty());
  Bytes empty_ow = encode_delta(DeltaEncoding::Overwrite, none, none, 1);
  EXPECT_TRUE(decode_delta(DeltaEncoding::Overwrite, empty_ow, 0, "t").positions.empty());
}

TEST(DeltaCodec, OneByteTensor) {
  Bytes base{0xAB};
  Bytes target{0xBA};
  Bytes x = encode_delta(DeltaEncoding::Xor, base, target, 1);
  EXPECT_EQ(decode_delta(DeltaEncoding::Xor, x, 1, "t").mask, (Bytes{0x11}));
  EXPECT_EQ(apply_copy(DeltaEncoding::Xor, x, base, "t"), target);
  Bytes o = encode_delta(DeltaEncoding::Overwrite, base, target, 1);
  EXPECT_EQ(zstd_decompress_bounded(o, 9, "p"), (Bytes{1, 0, 0, 0, 0, 0, 0, 0, 0xBA}));
  EXPECT_EQ(apply_copy(DeltaEncoding::Overwrite, o, base, "t"), target);
}

TEST(DeltaCodec, LargeTensorCrossesChunks) {
  // 3 MiB + 5: the xor mask is compressed in 1 MiB pieces; the frame must still declare the whole size.
  Bytes base((3u << 20) + 5);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  Bytes target = base;
  for (size_t i = 0; i < target.size(); i += 4099) target[i] ^= 0x5A;
  target.back() ^= 1;
  for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    Bytes payload = encode_delta(e, base, target, 1);
    EXPECT_LT(payload.size(), base.size() / 20);
    EXPECT_EQ(apply_copy(e, payload, base, "t"), target);
  }
}

TEST(DeltaCodec, FoldOneToThree) {
  Bytes v0(64);
  for (size_t i = 0; i < v0.size(); ++i) v0[i] = static_cast<uint8_t>(i * 37);
  Bytes v1 = v0, v2, v3;
  v1[0] ^= 1;
  v1[63] = 0;
  v2 = v1;
  v2[10] ^= 0x80;
  v2[0] ^= 1;  // back to the v0 byte
  v3 = v2;
  v3[32] = 0xEE;
  for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    Bytes d1 = encode_delta(e, v0, v1, 1);
    Bytes d2 = encode_delta(e, v1, v2, 1);
    Bytes d3 = encode_delta(e, v2, v3, 1);
    Bytes data = v1;
    for (const Bytes* d : {&d2, &d3}) {
      DecodedDelta delta = decode_delta(e, *d, data.size(), "t");
      apply_delta_swap(delta, data);
    }
    EXPECT_EQ(data, v3);
    data = v0;
    for (const Bytes* d : {&d1, &d2, &d3}) {
      DecodedDelta delta = decode_delta(e, *d, data.size(), "t");
      apply_delta_swap(delta, data);
    }
    EXPECT_EQ(data, v3);
  }
}

TEST(DeltaCodec, ApplySwapTwiceRestores) {
  Bytes base{1, 2, 3, 4, 5, 6};
  Bytes target{1, 9, 3, 4, 8, 6};
  for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    DecodedDelta delta = decode_delta(e, encode_delta(e, base, target, 1), 6, "t");
    Bytes data = base;
    apply_delta_swap(delta, data);
    EXPECT_EQ(data, target);
    if (e == DeltaEncoding::Overwrite) {
      EXPECT_EQ(delta.values, (Bytes{2, 5}));  // the bytes it replaced
    }
    apply_delta_swap(delta, data);
    EXPECT_EQ(data, base);
  }
  DecodedDelta delta = decode_delta(DeltaEncoding::Xor, encode_delta(DeltaEncoding::Xor, base, target, 1), 6, "t");
  Bytes wrong(5);
  expect_error([&] { apply_delta_swap(delta, wrong); }, ErrorKind::Mismatch, {"6 bytes", "5 bytes"});
}

TEST(DeltaCodec, EncodeRejectsSizeMismatch) {
  Bytes a(3), b(4);
  expect_error([&] { encode_delta(DeltaEncoding::Xor, a, b, 1); }, ErrorKind::Mismatch, {"xor", "3", "4"});
}

TEST(DeltaCodec, XorMaskLongerOrShorter) {
  const std::string t = "model.layers.0.mlp.up_proj.weight";
  expect_error([&] { decode_delta(DeltaEncoding::Xor, zstd(Bytes(17)), 16, t); }, ErrorKind::Format,
               {"'" + t + "'", "mask of 17 bytes declared, tensor has 16 bytes"});
  expect_error([&] { decode_delta(DeltaEncoding::Xor, zstd(Bytes(15)), 16, t); }, ErrorKind::Format,
               {"'" + t + "'", "mask of 15 bytes declared, tensor has 16 bytes"});
}

TEST(DeltaCodec, OverwriteStructureErrors) {
  const std::string t = "lm_head.weight";
  auto decode = [&](const Bytes& raw) { decode_delta(DeltaEncoding::Overwrite, zstd(raw), 16, t); };
  expect_error([&] { decode({5, 0, 0, 0, 1, 0, 0, 0}); }, ErrorKind::Format,
               {"'lm_head.weight'", "count 5 needs 29 bytes, payload has 8"});
  expect_error([&] { decode({2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 9, 9}); }, ErrorKind::Format,
               {"'lm_head.weight'", "positions not strictly increasing: 1 after 3 (index 1)"});
  expect_error([&] { decode({2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 9, 9}); }, ErrorKind::Format,
               {"'lm_head.weight'", "duplicate position 2 (index 1)"});
  expect_error([&] { decode({1, 0, 0, 0, 16, 0, 0, 0, 9}); }, ErrorKind::Format,
               {"'lm_head.weight'", "position 16 (index 0) out of range for 16 bytes"});
  expect_error([&] { decode({1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 9}); }, ErrorKind::Format,
               {"'lm_head.weight'", "position 4294967295 (index 0) out of range"});
  expect_error([&] { decode({1, 0, 0, 0, 2, 0, 0, 0, 0x55, 0x66}); }, ErrorKind::Format,
               {"'lm_head.weight'", "1 trailing bytes after the 1 overwrite values"});
  expect_error([&] { decode({1, 0}); }, ErrorKind::Format, {"'lm_head.weight'", "too short for the u32 count"});
}

TEST(DeltaCodec, FramingErrors) {
  const std::string t = "model.norm.weight";
  Bytes good = encode_delta(DeltaEncoding::Xor, Bytes(64, 1), Bytes(64, 3), 1);
  for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    Bytes trailing = (e == DeltaEncoding::Xor) ? good : zstd({0, 0, 0, 0});
    trailing.push_back(0);
    expect_error([&] { decode_delta(e, trailing, 64, t); }, ErrorKind::Format,
                 {"'" + t + "'", "1 trailing bytes after the zstd frame"});
    Bytes truncated = (e == DeltaEncoding::Xor) ? good : zstd({0, 0, 0, 0});
    truncated.pop_back();
    expect_error([&] { decode_delta(e, truncated, 64, t); }, ErrorKind::Format,
                 {"'" + t + "'", "truncated or corrupt zstd frame"});
    expect_error([&] { decode_delta(e, Bytes{1, 2, 3, 4, 5}, 64, t); }, ErrorKind::Format,
                 {"'" + t + "'", "not a zstd frame"});
    expect_error([&] { decode_delta(e, Bytes{}, 64, t); }, ErrorKind::Format, {"'" + t + "'", "not a zstd frame"});
    expect_error([&] { decode_delta(e, Bytes{0x28, 0xB5, 0x2F, 0xFD}, 64, t); }, ErrorKind::Format,
                 {"'" + t + "'", "truncated or corrupt zstd frame header"});
  }
}

TEST(DeltaCodec, FrameWithoutContentSizeRejected) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ASSERT_NE(cctx, nullptr);
  ASSERT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0)));
  Bytes mask(16, 0);
  Bytes frame(ZSTD_compressBound(mask.size()));
  size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), mask.data(), mask.size());
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(n));
  frame.resize(n);
  for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    expect_error([&] { decode_delta(e, frame, 16, "w"); }, ErrorKind::Format,
                 {"'w'", "does not declare its content size"});
  }
}

TEST(DeltaCodec, HandBuiltFramesAndLyingSize) {
  // A valid hand-built frame decodes, which proves the builder right ...
  EXPECT_EQ(zstd_decompress_bounded(raw_block_frame(4, {1, 0, 0, 0}), 100, "p"), (Bytes{1, 0, 0, 0}));
  Bytes out(3);
  zstd_decompress_exact(raw_block_frame(3, {7, 8, 9}), out, "p");
  EXPECT_EQ(out, (Bytes{7, 8, 9}));
  // ... so a header that declares fewer bytes than its block carries is a lie the decoder must refuse.
  Bytes liar = raw_block_frame(4, {1, 0, 0, 0, 0, 0, 0, 0, 9});  // count 1, position 0, value 9: 9 bytes
  expect_error([&] { decode_delta(DeltaEncoding::Overwrite, liar, 16, "liar.weight"); }, ErrorKind::Format,
               {"'liar.weight'", "zstd frame"});
  Bytes exact(4);
  expect_error([&] { zstd_decompress_exact(liar, exact, "mask of 'liar.weight'"); }, ErrorKind::Format,
               {"'liar.weight'", "zstd frame"});
}

TEST(DeltaCodec, MultiBlockFrameLyingAboutItsSize) {
  Bytes data(3'000'000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 ^ (i >> 13));
  Bytes frame = zstd_compress(data, 1);
  // 3 MB at level 1: window (2^19) smaller than the content, so Single_Segment = 0, a Window_Descriptor byte,
  // then a 4-byte Frame_Content_Size at offset 6 (FHD 0x80, RFC 8878 3.1.1.1).
  ASSERT_EQ(frame[4], 0x80);
  EXPECT_EQ(zstd_decompress_bounded(frame, 4'000'000, "honest"), data);  // output grown across 1 MiB steps
  for (int b = 0; b < 4; ++b) frame[6 + b] = static_cast<uint8_t>(2'000'000u >> (8 * b));
  expect_error([&] { zstd_decompress_bounded(frame, 4'000'000, "payload of 'x.weight'"); }, ErrorKind::Format,
               {"'x.weight'", "zstd frame produces more than the 2000000 bytes it declares"});
  for (int b = 0; b < 4; ++b) frame[6 + b] = static_cast<uint8_t>(3'500'000u >> (8 * b));
  expect_error([&] { zstd_decompress_bounded(frame, 4'000'000, "payload of 'x.weight'"); }, ErrorKind::Format,
               {"'x.weight'", "corrupt zstd frame"});
}

TEST(DeltaCodec, BombDeclaringOneTerabyteFailsFast) {
  // Frame header declaring 10^12 bytes (8-byte Frame_Content_Size, window 1 MiB) and one empty last raw block.
  const uint64_t tera = 1'000'000'000'000ull;
  Bytes bomb{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x50};
  for (int i = 0; i < 8; ++i) bomb.push_back(static_cast<uint8_t>(tera >> (8 * i)));
  bomb.insert(bomb.end(), {0x01, 0x00, 0x00});
  EXPECT_EQ(zstd_declared_size(bomb, "bomb"), tera);
  auto start = std::chrono::steady_clock::now();
  expect_error([&] { decode_delta(DeltaEncoding::Overwrite, bomb, 16, "embed.weight"); }, ErrorKind::Format,
               {"'embed.weight'", "declares 1000000000000 bytes, beyond the bound of 84"});
  expect_error([&] { decode_delta(DeltaEncoding::Xor, bomb, 16, "embed.weight"); }, ErrorKind::Format,
               {"'embed.weight'", "mask of 1000000000000 bytes declared, tensor has 16 bytes"});
  expect_error([&] { zstd_decompress_bounded(bomb, uint64_t{1} << 30, "bomb payload"); }, ErrorKind::Format,
               {"bomb payload", "beyond the bound of 1073741824"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5);
}

/// A hand-built frame (RFC 8878) of `blocks` RLE blocks of 128 KiB each ('A'): Single_Segment = 0, Window_Descriptor
/// `window`, 4-byte Frame_Content_Size. Big enough that streaming decoding cannot finish in one output chunk.
Bytes rle_frame(uint8_t window, int blocks) {
  const uint32_t block = 128 * 1024;
  const uint32_t content = block * static_cast<uint32_t>(blocks);
  Bytes f{0x28, 0xB5, 0x2F, 0xFD, 0x80, window};
  for (int b = 0; b < 4; ++b) f.push_back(static_cast<uint8_t>(content >> (8 * b)));
  for (int i = 0; i < blocks; ++i) {
    const uint32_t header = block << 3 | 1u << 1 | (i + 1 == blocks ? 1u : 0u);  // Block_Type = RLE
    f.insert(f.end(), {static_cast<uint8_t>(header), static_cast<uint8_t>(header >> 8),
                       static_cast<uint8_t>(header >> 16), 'A'});
  }
  return f;
}

// Regression (fuzz/fuzz_xor_payload, whose check that both xor decoders accept the same payloads caught it): a
// frame asking for a window beyond zstd's default decoder limit of 2^27 decoded one-shot in decode_delta but was
// refused mid-stream by apply_xor_payload as a "corrupt zstd frame". Every decoder now refuses it from the header.
TEST(DeltaCodec, FrameWindowBeyondDecoderLimitRefusedByEveryDecoder) {
  const size_t size = 3 * 128 * 1024;
  const Bytes at_limit = rle_frame(17 << 3, 3);     // 2^(10+17) = 128 MiB
  const Bytes beyond = rle_frame(17 << 3 | 1, 3);   // 128 MiB + 16 MiB
  const Bytes base(size, 0x01);
  Bytes data = base;
  apply_xor_payload(at_limit, data, "w");
  EXPECT_EQ(data, Bytes(size, 0x01 ^ 'A'));
  EXPECT_EQ(decode_delta(DeltaEncoding::Xor, at_limit, size, "w").mask, Bytes(size, 'A'));

  const std::string limit = "zstd frame window of 150994944 bytes exceeds the decoder limit of 134217728 bytes "
                            "(windowLog 27)";
  data = base;
  EXPECT_EQ(test::error_message([&] { apply_xor_payload(beyond, data, "w"); }, ErrorKind::Format),
            "xor mask of tensor 'w': " + limit);
  EXPECT_EQ(data, base);
  EXPECT_EQ(test::error_message([&] { decode_delta(DeltaEncoding::Xor, beyond, size, "w"); }, ErrorKind::Format),
            "xor mask of tensor 'w': " + limit);
  EXPECT_EQ(test::error_message([&] { decode_delta(DeltaEncoding::Overwrite, beyond, size, "w"); }, ErrorKind::Format),
            "overwrite delta of tensor 'w': " + limit);
  // A single-segment frame's window is its content size.
  Bytes single{0x28, 0xB5, 0x2F, 0xFD, 0xA0};  // FCS 4 bytes, Single_Segment
  for (uint32_t v = (1u << 27) + 1, b = 0; b < 4; ++b) single.push_back(static_cast<uint8_t>(v >> (8 * b)));
  single.insert(single.end(), {0x01, 0x00, 0x00});
  EXPECT_EQ(test::error_message([&] { zstd_declared_size(single, "p"); }, ErrorKind::Format),
            "p: zstd frame window of 134217729 bytes exceeds the decoder limit of 134217728 bytes (windowLog 27)");
}

TEST(DeltaCodec, FrameEncoderPiecesAndPledge) {
  Bytes data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i % 7);
  ZstdFrameEncoder encoder(data.size(), 1);
  encoder.update(std::span<const uint8_t>(data).first(300));
  encoder.update(std::span<const uint8_t>(data).subspan(300));
  Bytes frame = encoder.finish();
  Bytes out(1000);
  zstd_decompress_exact(frame, out, "p");
  EXPECT_EQ(out, data);

  ZstdFrameEncoder short_feed(10, 1);
  short_feed.update(Bytes(4));
  expect_error([&] { short_feed.finish(); }, ErrorKind::Format, {"4 bytes fed, 10 pledged"});
  ZstdFrameEncoder over_feed(2, 1);
  expect_error([&] { over_feed.update(Bytes(3)); }, ErrorKind::Format, {"beyond the pledged 2"});
}

}  // namespace
}  // namespace wsb
