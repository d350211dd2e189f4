// Synthetic versions on top of real weights: with an initial checkpoint, publish() writes that checkpoint's bytes as
// FULL v0 and perturbs them for v1.. exactly as it perturbs synthesized ones, and write_full_checkpoint gives the
// same bytes at any version (the native-load reference of a cell on a real checkpoint).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "publication/publication.hpp"
#include "publisher/initial_weights.hpp"
#include "tests/support/checkpoint_copy.hpp"
#include "tests/support/file_bytes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kTiny = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";

TEST(InitialWeights, PublishPerturbsTheRealCheckpoint) {
  test::TempDir dir;
  const ModelProfile profile = profile_from_hf_dir(kTiny);
  PublishOptions options;
  options.store = dir / "store";
  options.last_version = 2;
  options.seed = 5;
  options.initial_checkpoint = kTiny;
  const auto stats = publish(profile, options);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].source, kTiny);
  EXPECT_EQ(test::read_bytes(Store(options.store).update_dir(0) / "config.json"),
            test::read_bytes(kTiny / "config.json"));
  write_full_checkpoint(profile, 5, 2, std::nullopt, dir / "reference", 2ull << 30, 1, kTiny);
  CheckpointReader real(kTiny), reference(dir / "reference");
  const Publication v0(Store(options.store), 0), v2(Store(options.store), 2);
  uint64_t differ = 0;
  for (const TensorSpec& t : profile.canonical_tensors()) {
    const auto a = real.data(t.name), b = v0.payload(t.name);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << t.name;
    // v2 = the real bytes perturbed at versions 1 and 2 (perturb_version, default density 0.01 for BF16).
    std::vector<uint8_t> expected(a.begin(), a.end());
    perturb_version(profile, t, 5, 1, 0.01, expected);
    perturb_version(profile, t, 5, 2, 0.01, expected);
    EXPECT_EQ(v2.expected_checksum(t.name), xxh3_128_hex(expected)) << t.name;
    const auto r = reference.data(t.name);
    EXPECT_TRUE(std::equal(r.begin(), r.end(), expected.begin(), expected.end())) << t.name;
    differ += !std::equal(a.begin(), a.end(), expected.begin());
  }
  // 28 of 30 tensors moved: two 64-element norms drew no element at 1% in either version.
  EXPECT_EQ(differ, 28u);
  EXPECT_EQ(stats[1].changes.at("BF16").elements, 125376u);
  EXPECT_EQ(stats[1].changes.at("BF16").changed, stats[1].changed_values);
  EXPECT_EQ(stats[1].payload_bytes.size(), 1u);
}

TEST(InitialWeights, AppendingChecksTheBaseAgainstTheRealCheckpoint) {
  test::TempDir dir;
  const ModelProfile profile = profile_from_hf_dir(kTiny);
  PublishOptions options;
  options.store = dir / "store";
  options.last_version = 1;
  options.initial_checkpoint = kTiny;
  publish(profile, options);
  options.first_version = options.last_version = 2;
  EXPECT_EQ(publish(profile, options).size(), 1u);  // same checkpoint and seed: the base checks out
  const fs::path other = dir / "other";
  test::copy_checkpoint(kTiny, other);
  test::flip_elements(other, "model.norm.weight", {3});
  options.first_version = options.last_version = 3;
  options.initial_checkpoint = other;
  const std::string message = test::error_message([&] { publish(profile, options); }, ErrorKind::Checksum);
  EXPECT_NE(message.find(fmt::format("tensor 'model.norm.weight' of published version 000002 is not the checkpoint {} "
                                     "perturbed with seed 0",
                                     other.string())),
            std::string::npos)
      << message;
}

TEST(InitialWeights, RefusesACheckpointThatIsNotTheProfileNamingTheTensor) {
  test::TempDir dir;
  const fs::path bad = dir / "bad";
  test::copy_checkpoint(kTiny, bad);
  test::edit_checkpoint_tensor(bad, "model.norm.weight", [](test::EditableTensor& t) { t.spec.dtype = DType::F16; });
  const ModelProfile profile = profile_from_hf_dir(kTiny);
  PublishOptions options;
  options.store = dir / "store";
  options.initial_checkpoint = bad;
  EXPECT_EQ(test::error_message([&] { publish(profile, options); }, ErrorKind::Mismatch),
            fmt::format("{}: tensor 'model.norm.weight' is F16 [64], the model expects BF16 [64]", bad.string()));
  EXPECT_FALSE(fs::exists(options.store / "updates" / "weight_v000000"));
}

}  // namespace
}  // namespace wsb
