// Updates of the MoE tiny presets (glm4_moe FP8 and BF16, deepseek_v3 NVFP4 and BF16, gpt_oss MXFP4 and BF16)
// through the sync modes on the embedded engine at TP 2: boot at v0 from a published store, update to v1, then
// catch up to v3 (folding two deltas); after each commit the per-rank storage checksums and the probe fingerprint
// equal those of a fresh engine natively loaded from the publisher's FULL checkpoint of that version, and no
// storage moved.
#include <gtest/gtest.h>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;
const char* const kPrompt = "moe update probe";

using test::Served;

class MoeEngineUpdates : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override { test::publish_tiny(store(), 3, kSeed, DeltaEncoding::Xor, profile_id()); }
  const std::string& profile_id() const { return std::get<0>(GetParam()); }
  std::filesystem::path store() const { return dir_ / "store"; }
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version) {
    auto engine = std::make_unique<Engine>(EngineOptions{test::tiny_profile(profile_id()), 2, test::sync_of(std::get<1>(GetParam())),
                                                         store(), dir_ / ("work" + std::to_string(counter_++)), 2});
    engine->load_native(checkpoint, version);
    return engine;
  }
  Served served(Engine& e) { return test::served(e, kPrompt); }
  /// The reference: a fresh engine natively loaded from the publisher's FULL checkpoint of `version`.
  Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    write_full_checkpoint(test::tiny_profile(profile_id()), kSeed, version, std::nullopt, dir);
    auto engine = boot(dir, version);
    return served(*engine);
  }

  test::TempDir dir_;
  int counter_ = 0;
};

TEST_P(MoeEngineUpdates, UpdatesToV1ThenV3EqualNativeLoads) {
  auto engine = boot(Store(store()).update_dir(0), 0);
  const Served v0 = served(*engine);
  EXPECT_EQ(v0, native(0));
  const auto pointers = engine->storage_pointers();

  engine->prepare(1);
  engine->commit(1);
  const Served v1 = served(*engine);
  EXPECT_EQ(v1.version, 1u);
  EXPECT_EQ(v1, native(1));
  EXPECT_NE(v1.fingerprint, v0.fingerprint);  // one code step of a few thousandths of the values shows

  engine->prepare(3);
  engine->commit(3);
  const Served v3 = served(*engine);
  EXPECT_EQ(v3.version, 3u);
  EXPECT_EQ(v3, native(3));
  EXPECT_NE(v3.fingerprint, v1.fingerprint);
  EXPECT_EQ(engine->storage_pointers(), pointers);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeEngineUpdates,
                         ::testing::Combine(::testing::Values(std::string("glm-tiny-fp8"),
                                                              std::string("glm-tiny-bf16"),
                                                              std::string("kimi-tiny-nvfp4"),
                                                              std::string("kimi-tiny-bf16"),
                                                              std::string("gpt-oss-tiny-mxfp4"),
                                                              std::string("gpt-oss-tiny-bf16")),
                                            ::testing::Values(std::string("disk"), std::string("cpu"), std::string("refit"))),
                         test::PairParamName());

}  // namespace
}  // namespace wsb
