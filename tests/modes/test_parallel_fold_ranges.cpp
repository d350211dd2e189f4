// Folds of publications whose checksums are "xxh3-128-ranges": segments start only on range boundaries, each
// segment verifies its own ranges as it folds (no serial hash of the whole tensor), the result is the target for
// every mix of encodings, framings and thread counts, and a wrong range digest is named and restores every byte.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/errors.hpp"
#include "modes/sync/delta_fold.hpp"
#include "modes/sync/parallel_fold.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using Canonical = std::map<std::string, Bytes>;
using test::error_message;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kRange = kMiB;
constexpr uint64_t kFrame = 256 << 10;
const FoldOptions kUnits{.chunk_bytes = 64 << 10, .min_segment_bytes = kFrame, .segment_bytes = 2 * kFrame};

const std::string kBig = "model.embed_tokens.weight";
const std::vector<TensorSpec> kTensors{
    {kBig, DType::BF16, {1792, 1024}},  // 3.5 MiB: ranges of 1 MiB, the last one half
    {"model.norm.weight", DType::F32, {100}},
    {"model.layers.0.input_layernorm.weight", DType::BF16, {0}},
};

/// Version v: v0 draws valid in every format (bits 1..5), version k flipping bit 0 of every 61st byte from k.
Canonical at(uint32_t v) {
  Canonical out;
  for (const TensorSpec& t : kTensors) {
    Bytes b(t.bytes());
    std::mt19937 rng(static_cast<uint32_t>(t.bytes()));
    for (auto& x : b) x = static_cast<uint8_t>(rng() & 0x3E);
    for (uint32_t k = 1; k <= v; ++k) {
      for (size_t i = k; i < b.size(); i += 61) b[i] ^= 1;
    }
    out[t.name] = b;
  }
  return out;
}

using Edit = std::function<void(const std::string& tensor, std::string& checksum)>;

struct RangedStore {
  test::TempDir dir;
  Store store{dir.path()};
  RangedStore() {
    PublicationWriter writer(store.update_dir(0), PublicationManifest{}, 8 * kMiB, true, false);
    const Canonical v0 = at(0);
    for (const TensorSpec& t : kTensors) writer.add(t, v0.at(t.name), xxh3_128_hex(v0.at(t.name)));
    writer.commit();
  }
  void delta(uint32_t v, DeltaEncoding encoding, PayloadFraming framing, const Edit& edit = {}) {
    PublicationWriter writer(store.update_dir(v), delta_manifest(v, encoding, framing, kRange), 8 * kMiB, true,
                             false);
    const Canonical base = at(v - 1), target = at(v);
    for (const TensorSpec& t : kTensors) {
      Bytes payload = encode_delta(encoding, base.at(t.name), target.at(t.name), 1,
                                   framing == PayloadFraming::Frames ? kFrame : 0);
      std::string checksum = tensor_checksum_text(target.at(t.name), kRange);
      if (edit) edit(t.name, checksum);
      TensorSpec spec{t.name, DType::U8, {static_cast<int64_t>(payload.size())}};
      writer.add(std::move(spec), std::move(payload), checksum);
    }
    writer.commit();
  }
};

struct Image {
  Canonical bytes = at(0);
  std::vector<FoldTarget> targets;
  Image() {
    for (const TensorSpec& t : kTensors) targets.push_back(FoldTarget{&t, bytes.at(t.name)});
  }
};

struct Case {
  std::vector<DeltaEncoding> steps;
  PayloadFraming framing;
  int threads;
  size_t big_segments;  ///< segments of the 3.5 MiB tensor
};

class RangedFold : public ::testing::TestWithParam<Case> {};

TEST_P(RangedFold, EqualsTheTargetWithSegmentsOnRangeBoundaries) {
  const Case c = GetParam();
  RangedStore s;
  for (uint32_t v = 1; v <= c.steps.size(); ++v) s.delta(v, c.steps[v - 1], c.framing);
  const uint32_t last = static_cast<uint32_t>(c.steps.size());
  const UpdatePlan plan = plan_update(s.store, 0, last);
  Image image;
  std::vector<OverwriteBody> bodies;
  const TensorFold fold(plan, kTensors[0], image.bytes.at(kBig), bodies, kUnits);
  ASSERT_EQ(fold.segment_count(), c.big_segments);
  for (size_t k = 0; k + 1 < fold.segment_count(); ++k) EXPECT_EQ(fold.segment_end(k), (k + 1) * kRange);
  FoldWorkspace workspace;
  fold_in_parallel(plan, image.targets, c.threads, workspace, {}, kUnits);
  EXPECT_EQ(image.bytes, at(last));
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, RangedFold,
    // Frames of 256 KiB merge to the 1 MiB ranges (4 segments); overwrite segments of 512 KiB round up to one
    // range; a one-frame xor step keeps the tensor whole, verified range by range on one thread.
    ::testing::Values(Case{{DeltaEncoding::Xor}, PayloadFraming::Frames, 4, 4},
                      Case{{DeltaEncoding::Overwrite}, PayloadFraming::OneFrame, 3, 4},
                      Case{{DeltaEncoding::Xor, DeltaEncoding::Overwrite, DeltaEncoding::Xor}, PayloadFraming::Frames,
                           2, 4},
                      Case{{DeltaEncoding::Xor}, PayloadFraming::OneFrame, 4, 1}));

TEST(RangedFoldFailures, AWrongRangeDigestIsNamedAndRestoresEveryTensor) {
  for (const PayloadFraming framing : {PayloadFraming::Frames, PayloadFraming::OneFrame}) {
    RangedStore s;
    std::string fake;
    s.delta(1, DeltaEncoding::Xor, framing, [&](const std::string& name, std::string& sum) {
      if (name != kBig) return;
      sum[2 * 32 + 7] = sum[2 * 32 + 7] == 'a' ? 'b' : 'a';  // third range
      fake = sum.substr(64, 32);
    });
    Image image;
    FoldWorkspace workspace;
    const std::string actual = tensor_checksum_text(at(1).at(kBig), kRange).substr(64, 32);
    EXPECT_EQ(error_message([&] { fold_in_parallel(plan_update(s.store, 0, 1), image.targets, 4, workspace, {}, kUnits); },
                            ErrorKind::Checksum),
              "tensor '" + kBig + "': xxh3-128 of version 000001 bytes [2097152, 3145728) (range 3 of 4) is " +
                  actual + ", publication says " + fake);
    EXPECT_EQ(image.bytes, at(0));
    // One tensor alone (fold_tensor) names it the same way and restores it.
    Bytes one = at(0).at(kBig);
    EXPECT_EQ(error_message([&] { fold_tensor(plan_update(s.store, 0, 1), kTensors[0], one, nullptr); },
                            ErrorKind::Checksum),
              "tensor '" + kBig + "': xxh3-128 of version 000001 bytes [2097152, 3145728) (range 3 of 4) is " +
                  actual + ", publication says " + fake);
    EXPECT_EQ(one, at(0).at(kBig));
  }
}

TEST(RangedFoldFailures, ThePartialLastRangeAndAnEmptyTensorAreCompared) {
  const std::string empty = kTensors[2].name;
  for (const std::string& tensor : {kBig, empty}) {
    RangedStore s;
    std::string fake;
    s.delta(1, DeltaEncoding::Overwrite, PayloadFraming::OneFrame, [&](const std::string& name, std::string& sum) {
      if (name != tensor) return;
      const size_t last = sum.size() - 32;  // the 0.5 MiB range 4 of kBig; the one digest of the empty tensor
      sum[last] = sum[last] == 'a' ? 'b' : 'a';
      fake = sum.substr(last);
    });
    const std::string actual = tensor_checksum_text(at(1).at(tensor), kRange).substr(tensor == kBig ? 96 : 0);
    const std::string message =
        tensor == kBig ? "tensor '" + kBig + "': xxh3-128 of version 000001 bytes [3145728, 3670016) (range 4 of 4) is " +
                             actual + ", publication says " + fake
                       : "tensor '" + empty + "': xxh3-128 of version 000001 bytes [0, 0) (range 1 of 1) is " + actual +
                             ", publication says " + fake;
    SCOPED_TRACE(tensor);
    Image image;
    FoldWorkspace workspace;
    EXPECT_EQ(error_message([&] { fold_in_parallel(plan_update(s.store, 0, 1), image.targets, 3, workspace, {}, kUnits); },
                            ErrorKind::Checksum),
              message);
    EXPECT_EQ(image.bytes, at(0));
    const TensorSpec& spec = tensor == kBig ? kTensors[0] : kTensors[2];
    Bytes one = at(0).at(tensor);
    EXPECT_EQ(error_message([&] { fold_tensor(plan_update(s.store, 0, 1), spec, one, nullptr); }, ErrorKind::Checksum),
              message);
  }
}

TEST(RangedFoldFailures, ADigestCountForAnotherSizeIsRefusedBeforeAnyByteChanges) {
  RangedStore s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, std::string& sum) {
    if (name == kBig) sum.resize(3 * 32);  // 3 digests: the checksum of a 3 MiB tensor
  });
  Image image;
  FoldWorkspace workspace;
  EXPECT_EQ(error_message([&] { fold_in_parallel(plan_update(s.store, 0, 1), image.targets, 4, workspace, {}, kUnits); },
                          ErrorKind::Format),
            "publication 000001 (" + s.store.update_dir(1).string() + ") tensor '" + kBig +
                "': checksum holds 96 hex characters, 3670016 bytes need 4 xxh3-128 digests (128 characters, ranges "
                "of 1048576 bytes)");
  EXPECT_EQ(image.bytes, at(0));
}

}  // namespace
}  // namespace wsb
