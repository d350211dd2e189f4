// Bad input at prepare: a delta whose target bytes hold a NaN / infinity code or an E8M0 0xFF scale is rejected by
// fold_tensor even though its checksum matches (the publisher checksummed the bad bytes), the error names the
// publication, tensor and element, and the canonical bytes are restored.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/delta_codec.hpp"
#include "publisher/publisher.hpp"
#include "publication/publication.hpp"
#include "modes/sync/delta_fold.hpp"
#include "tests/support/publication_writes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

using test::expect_error;

const TensorSpec kFp8{"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {4, 8}};
const TensorSpec kScales{"model.layers.0.mlp.experts.down_proj_scales", DType::U8, {2, 3, 5}};
const TensorSpec kBf16{"model.layers.0.self_attn.q_proj.weight", DType::BF16, {4, 8}};
const TensorSpec kNorm{"model.norm.weight", DType::F32, {8}};
const std::vector<TensorSpec> kTensors{kFp8, kScales, kBf16, kNorm};

using Canonical = std::map<std::string, Bytes>;

Canonical version0() {
  const ModelProfile profile = test::tiny_profile();
  Canonical out;
  for (const TensorSpec& t : kTensors) {
    Bytes b(t.bytes());
    synthesize_initial(profile, t, 5, b);
    out[t.name] = b;
  }
  return out;
}

void write_full(const Store& store, const Canonical& tensors, const std::vector<TensorSpec>& specs = kTensors) {
  test::write_full_publication(store, tensors, specs);
}

/// DELTA `version` from `base` to `target`, every checksum that of the target bytes (so it matches).
void write_delta(const Store& store, uint32_t version, DeltaEncoding encoding, const Canonical& base,
                 const Canonical& target, const std::vector<TensorSpec>& specs = kTensors) {
  test::write_delta_publication(store, version, encoding, base, target, specs);
}

class FoldRejectsInvalidCodes : public ::testing::TestWithParam<DeltaEncoding> {};

TEST_P(FoldRejectsInvalidCodes, EvenWithAMatchingChecksum) {
  test::TempDir dir;
  Store store(dir.path());
  const Canonical v0 = version0();
  Canonical v1 = v0;
  v1[kFp8.name][9] = 0x7F;   // E4M3 NaN
  v1[kFp8.name][3] ^= 1;     // and a valid change before it
  v1[kScales.name][4] = 0xFF;  // E8M0 NaN scale
  v1[kBf16.name][6] ^= 1;    // valid
  const uint32_t inf = 0xFF800000u;
  std::memcpy(&v1[kNorm.name][4 * 7], &inf, 4);  // -infinity
  Canonical v2 = v1;         // version 2 repairs every bad code
  v2[kFp8.name][9] = 0x7E;
  v2[kScales.name][4] = 0x7F;
  const float one = 1.0f;
  std::memcpy(&v2[kNorm.name][4 * 7], &one, 4);
  write_full(store, v0);
  write_delta(store, 1, GetParam(), v0, v1);
  write_delta(store, 2, GetParam(), v1, v2);

  const UpdatePlan plan = plan_update(store, 0, 1);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0]->manifest().encoding, GetParam());
  struct Case {
    const TensorSpec& spec;
    std::string message;
  };
  const std::vector<Case> bad{
      {kFp8, "publication 000001: tensor 'model.layers.0.mlp.down_proj.weight' (F8_E4M3 [4, 8]): element 9 [1, 1] "
             "holds E4M3 code 0x7F, which is NaN (1 invalid code in the tensor)"},
      {kScales, "publication 000001: tensor 'model.layers.0.mlp.experts.down_proj_scales' (U8 [2, 3, 5]): element 4 "
                "[0, 0, 4] holds E8M0 code 0xFF, which is NaN (an E8M0 scale of 0xFF)"},
      {kNorm, "publication 000001: tensor 'model.norm.weight' (F32 [8]): element 7 holds F32 code 0xFF800000, which "
              "is NaN or infinity"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.spec.name);
    // The publisher's checksum is that of the bad bytes: only the code check can catch them.
    EXPECT_EQ(plan.steps[0]->expected_checksum(c.spec.name), xxh3_128_hex(v1.at(c.spec.name)));
    Bytes bytes = v0.at(c.spec.name);
    FoldUndo undo;
    expect_error([&] { fold_tensor(plan, c.spec, bytes, &undo); }, ErrorKind::Format, {c.message});
    EXPECT_EQ(bytes, v0.at(c.spec.name)) << "bytes restored";
  }
  // A tensor whose target codes are valid folds as before, and unfolds.
  Bytes bf16 = v0.at(kBf16.name);
  FoldUndo undo;
  fold_tensor(plan, kBf16, bf16, &undo);
  EXPECT_EQ(bf16, v1.at(kBf16.name));
  unfold_tensor(plan, undo, bf16);
  EXPECT_EQ(bf16, v0.at(kBf16.name));

  // Catching up 0 -> 2 verifies only the final bytes, which are valid again: no error.
  const UpdatePlan catch_up = plan_update(store, 0, 2);
  for (const TensorSpec& t : kTensors) {
    Bytes bytes = v0.at(t.name);
    fold_tensor(catch_up, t, bytes, nullptr);
    EXPECT_EQ(bytes, v2.at(t.name)) << t.name;
  }
}

// A tensor of several stream chunks (the xor fold hashes and scans each chunk as it is produced): a NaN in a late
// chunk and a checksum that differs only by a byte in the last chunk are both caught, and the bytes restored.
TEST_P(FoldRejectsInvalidCodes, InALateChunkOfALargeTensor) {
  const TensorSpec big{"model.layers.0.mlp.up_proj.weight", DType::BF16, {512, 1100}};  // 1.07 MiB: 5 chunks
  const std::vector<TensorSpec> specs{big};
  test::TempDir dir;
  Store store(dir.path());
  Canonical v0;
  v0[big.name] = Bytes(big.bytes());
  synthesize_initial(test::tiny_profile(), big, 5, v0[big.name]);
  Canonical v1 = v0;
  const size_t nan_element = 490000;  // in the fourth 256 KiB chunk
  v1[big.name][2 * nan_element] = 0xC0;
  v1[big.name][2 * nan_element + 1] = 0x7F;  // BF16 0x7FC0: NaN
  v1[big.name][17] ^= 4;
  Canonical v2 = v0;
  v2[big.name][big.bytes() - 3] ^= 1;  // valid, in the last chunk
  write_full(store, v0, specs);
  write_delta(store, 1, GetParam(), v0, v1, specs);
  write_delta(store, 2, GetParam(), v1, v2, specs);

  Bytes bytes = v0.at(big.name);
  expect_error([&] { fold_tensor(plan_update(store, 0, 1), big, bytes, nullptr); }, ErrorKind::Format,
               {"publication 000001: tensor 'model.layers.0.mlp.up_proj.weight' (BF16 [512, 1100]): element 490000 "
                "[445, 500] holds BF16 code 0x7FC0, which is NaN or infinity (1 invalid code in the tensor)"});
  EXPECT_EQ(bytes, v0.at(big.name));
  fold_tensor(plan_update(store, 0, 2), big, bytes, nullptr);  // two steps; only the last one's chunks are final
  EXPECT_EQ(bytes, v2.at(big.name));

  // Version 3 carries v2's bytes xor a change in the last chunk, but the checksum of v2: only hashing every
  // chunk, the last included, catches it.
  Canonical v3 = v2;
  v3[big.name][big.bytes() - 2] ^= 1;
  PublicationManifest manifest;
  manifest.version = 3;
  manifest.kind = PublicationKind::Delta;
  manifest.base_version = 2;
  manifest.encoding = GetParam();
  manifest.compression_format = "zstd";
  {
    PublicationWriter writer(store.update_dir(3), manifest, 1 << 20, true, false);
    Bytes payload = encode_delta(GetParam(), v2.at(big.name), v3.at(big.name), 1);
    const TensorSpec stored{big.name, DType::U8, {static_cast<int64_t>(payload.size())}};
    writer.add(stored, std::move(payload), xxh3_128_hex(v2.at(big.name)));
    writer.commit();
    store.advance_latest(3);
  }
  expect_error([&] { fold_tensor(plan_update(store, 2, 3), big, bytes, nullptr); }, ErrorKind::Checksum,
               {"tensor 'model.layers.0.mlp.up_proj.weight': xxh3-128 of version 000003 is " +
                    xxh3_128_hex(v3.at(big.name)) + ", publication says " + xxh3_128_hex(v2.at(big.name))});
  EXPECT_EQ(bytes, v2.at(big.name));
}

INSTANTIATE_TEST_SUITE_P(Encodings, FoldRejectsInvalidCodes,
                         ::testing::Values(DeltaEncoding::Xor, DeltaEncoding::Overwrite),
                         [](const auto& info) { return info.param == DeltaEncoding::Xor ? "Xor" : "Overwrite"; });

}  // namespace
}  // namespace wsb
