// Chunked folding of a lineage (xor and overwrite steps advanced together over each chunk): the same bytes as
// folding step after step, however the tensor is cut; the checksum and the code check refuse what fold_tensor
// refuses, with its words.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "modes/sync/chunk_fold.hpp"
#include "modes/sync/delta_fold.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/publication_writes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using Canonical = std::map<std::string, Bytes>;

// Larger than the fold's 256 KiB block, not a multiple of it, with a tail that is not a whole code word.
const TensorSpec kBig{"model.layers.0.mlp.up_proj.weight", DType::BF16, {301, 1029}};
const TensorSpec kFp8{"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {4, 8}};
const std::vector<TensorSpec> kTensors{kBig, kFp8};

Canonical version0() {
  Canonical out;
  std::mt19937 rng(9);
  for (const TensorSpec& t : kTensors) {
    Bytes b(t.bytes());
    for (auto& x : b) x = static_cast<uint8_t>(rng() & 0x3F);  // never an all-ones exponent: valid codes
    out[t.name] = b;
  }
  return out;
}

/// `base` with every `stride`-th byte from `first` moved by one low bit (a valid code stays valid).
Canonical moved(const Canonical& base, size_t first, size_t stride) {
  Canonical out = base;
  for (auto& [name, bytes] : out) {
    for (size_t i = first; i < bytes.size(); i += stride) bytes[i] ^= 0x01;
  }
  return out;
}

void write_full(const Store& store, const Canonical& tensors) { test::write_full_publication(store, tensors, kTensors); }

/// DELTA `version` from `base` to `target`; `checksums` overrides the target checksum of a tensor; `frame_bytes`
/// > 0 writes "zstd-frames".
void write_delta(const Store& store, uint32_t version, DeltaEncoding encoding, const Canonical& base,
                 const Canonical& target, const std::map<std::string, std::string>& checksums = {},
                 uint64_t frame_bytes = 0) {
  test::write_delta_publication(store, version, encoding, base, target, kTensors, checksums, frame_bytes);
}

/// Folds `plan` into a copy of `base` through a TensorChunkFold, `chunk` bytes per call.
Bytes chunk_folded(const UpdatePlan& plan, const TensorSpec& spec, const Bytes& base, size_t chunk) {
  Bytes bytes = base;
  TensorChunkFold fold(plan, spec, plan.steps.back()->expected_checksum(spec.name, spec.bytes()), plan.to);
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    fold.apply(std::span<uint8_t>(bytes).subspan(at, std::min(chunk, bytes.size() - at)));
  }
  EXPECT_EQ(fold.position(), bytes.size());
  fold.finish([&] { return bytes; });
  return bytes;
}

class ChunkFold : public ::testing::Test {
 protected:
  void SetUp() override {
    v0 = version0();
    v1 = moved(v0, 3, 97);
    v2 = moved(v1, 5, 1001);
    v3 = moved(v2, 0, 13);
  }
  test::TempDir dir;
  Store store{dir.path()};
  Canonical v0, v1, v2, v3;
};

TEST_F(ChunkFold, ThreeMixedStepsEqualFoldingStepByStep) {
  write_full(store, v0);
  write_delta(store, 1, DeltaEncoding::Xor, v0, v1);
  write_delta(store, 2, DeltaEncoding::Overwrite, v1, v2);
  write_delta(store, 3, DeltaEncoding::Xor, v2, v3);
  const UpdatePlan plan = plan_update(store, 0, 3);
  for (const TensorSpec& spec : kTensors) {
    Bytes reference = v0.at(spec.name);
    fold_tensor(plan, spec, reference, nullptr);
    ASSERT_EQ(reference, v3.at(spec.name)) << spec.name;
    for (size_t chunk : {size_t{8}, size_t{4096}, size_t{1} << 18, size_t{8} << 20}) {
      EXPECT_EQ(chunk_folded(plan, spec, v0.at(spec.name), chunk), v3.at(spec.name)) << spec.name << " " << chunk;
    }
  }
}

TEST_F(ChunkFold, FramedPayloadsFoldAsOneFramePayloadsDo) {
  // 40000 mask bytes per frame: kBig's mask is 16 frames whose boundaries fall inside the fold's blocks, and the
  // last publication mixes framings (each step is read as its own manifest frames it).
  constexpr uint64_t kFrame = 40000;
  write_full(store, v0);
  write_delta(store, 1, DeltaEncoding::Xor, v0, v1, {}, kFrame);
  write_delta(store, 2, DeltaEncoding::Overwrite, v1, v2, {}, kFrame);
  write_delta(store, 3, DeltaEncoding::Xor, v2, v3);
  const UpdatePlan plan = plan_update(store, 0, 3);
  ASSERT_EQ(plan.steps[0]->manifest().framing, PayloadFraming::Frames);
  ASSERT_EQ(zstd_frame_extents(plan.steps[0]->payload(kBig.name), kBig.bytes(), "m").size(), 16u);
  for (const TensorSpec& spec : kTensors) {
    for (size_t chunk : {size_t{8}, size_t{4096}, size_t{1} << 18, size_t{8} << 20}) {
      EXPECT_EQ(chunk_folded(plan, spec, v0.at(spec.name), chunk), v3.at(spec.name)) << spec.name << " " << chunk;
    }
  }
}

TEST_F(ChunkFold, NoStepVerifiesTheBytesAgainstTheGivenChecksum) {
  write_full(store, v0);
  UpdatePlan plan;
  Bytes bytes = v0.at(kBig.name);
  TensorChunkFold fold(plan, kBig, ExpectedChecksum(xxh3_128_hex(bytes), 0, kBig.bytes(), "t"), 0);
  fold.apply(bytes);
  fold.finish([] { return Bytes{}; });
  EXPECT_EQ(bytes, v0.at(kBig.name));
  Bytes other = bytes;
  other[1] ^= 1;
  TensorChunkFold wrong(plan, kBig, ExpectedChecksum(xxh3_128_hex(bytes), 0, kBig.bytes(), "t"), 0);
  wrong.apply(other);
  EXPECT_EQ(test::error_message([&] { wrong.finish([] { return Bytes{}; }); }, ErrorKind::Checksum),
            fmt::format("tensor '{}': xxh3-128 of version 000000 is {}, publication says {}", kBig.name,
                        xxh3_128_hex(other), xxh3_128_hex(bytes)));
}

TEST_F(ChunkFold, RangedChecksumIsVerifiedRangeByRange) {
  constexpr uint64_t kMiB = 1 << 20;
  const TensorSpec spec{"model.layers.0.mlp.gate_proj.weight", DType::U8, {static_cast<int64_t>(2 * kMiB + kMiB / 2)}};
  Bytes bytes(spec.bytes());
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + (i >> 11));
  const std::string text = tensor_checksum_text(bytes, kMiB);
  UpdatePlan plan;
  TensorChunkFold fold(plan, spec, ExpectedChecksum(text, kMiB, spec.bytes(), "t"), 0);
  for (size_t at = 0; at < bytes.size(); at += 1 << 18) fold.apply(std::span(bytes).subspan(at, 1 << 18));
  fold.finish([] { return Bytes{}; });
  Bytes other = bytes;
  other[kMiB + kMiB / 2] ^= 4;  // the second range
  TensorChunkFold wrong(plan, spec, ExpectedChecksum(text, kMiB, spec.bytes(), "t"), 0);
  wrong.apply(other);
  EXPECT_EQ(test::error_message([&] { wrong.finish([] { return Bytes{}; }); }, ErrorKind::Checksum),
            fmt::format("tensor '{}': xxh3-128 of version 000000 bytes [1048576, 2097152) (range 2 of 3) is {}, "
                        "publication says {}",
                        spec.name, xxh3_128_hex(std::span(other).subspan(kMiB, kMiB)), text.substr(32, 32)));
}

TEST_F(ChunkFold, WrongTargetChecksumIsNamedAsFoldTensorNamesIt) {
  write_full(store, v0);
  write_delta(store, 1, DeltaEncoding::Xor, v0, v1);
  const std::string fake(32, 'a');
  write_delta(store, 2, DeltaEncoding::Overwrite, v1, v2, {{kBig.name, fake}});
  const UpdatePlan plan = plan_update(store, 0, 2);
  const std::string expected = fmt::format("tensor '{}': xxh3-128 of version 000002 is {}, publication says {}",
                                           kBig.name, xxh3_128_hex(v2.at(kBig.name)), fake);
  EXPECT_EQ(test::error_message([&] { chunk_folded(plan, kBig, v0.at(kBig.name), 4096); }, ErrorKind::Checksum),
            expected);
  Bytes bytes = v0.at(kBig.name);
  EXPECT_EQ(test::error_message([&] { fold_tensor(plan, kBig, bytes, nullptr); }, ErrorKind::Checksum), expected);
}

TEST_F(ChunkFold, InvalidCodeIsRefusedWithTheWholeTensorsMessage) {
  Canonical bad = v1;
  bad[kFp8.name][9] = 0x7F;  // E4M3 NaN, checksummed by the publisher
  write_full(store, v0);
  write_delta(store, 1, DeltaEncoding::Xor, v0, bad);
  const UpdatePlan plan = plan_update(store, 0, 1);
  const std::string expected =
      "publication 000001: tensor 'model.layers.0.mlp.down_proj.weight' (F8_E4M3 [4, 8]): element 9 [1, 1] holds "
      "E4M3 code 0x7F, which is NaN (1 invalid code in the tensor)";
  EXPECT_EQ(test::error_message([&] { chunk_folded(plan, kFp8, v0.at(kFp8.name), 8); }, ErrorKind::Format), expected);
  // The valid tensor of the same publication folds.
  EXPECT_EQ(chunk_folded(plan, kBig, v0.at(kBig.name), 1 << 18), bad.at(kBig.name));
}

TEST_F(ChunkFold, ChunksMustTileTheTensorOnCodeWords) {
  write_full(store, v0);
  write_delta(store, 1, DeltaEncoding::Xor, v0, v1);
  const UpdatePlan plan = plan_update(store, 0, 1);
  Bytes bytes = v0.at(kBig.name);
  TensorChunkFold fold(plan, kBig, plan.steps.back()->expected_checksum(kBig.name, kBig.bytes()), 1);
  fold.apply(std::span<uint8_t>(bytes).first(12));
  EXPECT_EQ(test::error_message([&] { fold.apply(std::span<uint8_t>(bytes).subspan(12, 8)); }, ErrorKind::State),
            fmt::format("tensor '{}': chunk at offset 12 does not start on a code word", kBig.name));
  TensorChunkFold past(plan, kBig, plan.steps.back()->expected_checksum(kBig.name, kBig.bytes()), 1);
  Bytes longer(bytes.size() + 8);
  EXPECT_EQ(test::error_message([&] { past.apply(longer); }, ErrorKind::State),
            fmt::format("tensor '{}': chunk of {} bytes at offset 0 runs past its {} bytes", kBig.name, longer.size(),
                        bytes.size()));
  TensorChunkFold early(plan, kBig, plan.steps.back()->expected_checksum(kBig.name, kBig.bytes()), 1);
  early.apply(std::span<uint8_t>(bytes).first(16));
  EXPECT_EQ(test::error_message([&] { early.finish([] { return Bytes{}; }); }, ErrorKind::State),
            fmt::format("tensor '{}': folded 16 of {} bytes", kBig.name, bytes.size()));
}

}  // namespace
}  // namespace wsb
