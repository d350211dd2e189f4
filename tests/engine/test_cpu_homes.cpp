// cpu mode at TP 1, where most canonical tensors live in the rank images and the fold writes the runtime bytes in
// place (modes/cpu/canonical_homes.hpp): for every tiny preset, with the full copy and with device-delta,
// v0 -> v1 -> v3 serve exactly what a fresh TP 1 native load serves, storages keep their addresses, and
// device-delta still stages the in-place folds (llama's embedding, a home, is patched, not copied).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/param_names.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;

using test::Served;

uint64_t phase_bytes(const std::vector<PhaseRecord>& phases, const std::string& name) {
  uint64_t bytes = 0;
  for (const auto& p : phases) {
    if (p.name == name) bytes += p.bytes;
  }
  return bytes;
}

int phase_count(const std::vector<PhaseRecord>& phases, const std::string& name) {
  return static_cast<int>(std::count_if(phases.begin(), phases.end(), [&](const auto& p) { return p.name == name; }));
}

class CpuHomesTp1 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override { test::publish_tiny(store(), 3, kSeed, DeltaEncoding::Xor, preset()); }
  const std::string& preset() const { return std::get<0>(GetParam()); }
  std::filesystem::path store() const { return dir_ / "store"; }
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version, const std::string& strategy) {
    EngineOptions options{test::tiny_profile(preset()), 1, test::sync_of("cpu"), store(),
                          dir_ / ("work" + std::to_string(n_++)), 2};
    options.sync.cpu.commit_strategy = parse_commit_strategy(strategy);
    auto engine = std::make_unique<Engine>(options);
    engine->load_native(checkpoint, version);
    return engine;
  }
  Served served(Engine& e) { return test::served(e, "homes probe"); }
  Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    write_full_checkpoint(test::tiny_profile(preset()), kSeed, version, std::nullopt, dir);
    return served(*boot(dir, version, "full"));
  }

  test::TempDir dir_;
  int n_ = 0;
};

TEST_P(CpuHomesTp1, UpdatesEqualNativeLoads) {
  auto engine = boot(Store(store()).update_dir(0), 0, std::get<1>(GetParam()));
  const auto pointers = engine->storage_pointers();
  for (uint32_t target : {1u, 3u}) {
    SCOPED_TRACE(target);
    engine->prepare(target);
    engine->commit(target);
    EXPECT_EQ(served(*engine), native(target));
  }
  EXPECT_EQ(engine->storage_pointers(), pointers);
}

INSTANTIATE_TEST_SUITE_P(Tiny, CpuHomesTp1,
                         ::testing::Combine(::testing::ValuesIn(test::tiny_presets()),
                                            ::testing::Values(std::string("full"), std::string("device-delta"))),
                         test::PairParamName());

class CpuHomesDeviceDelta : public CpuHomesTp1 {};

TEST_P(CpuHomesDeviceDelta, TheInPlaceFoldOfTheEmbeddingIsStagedNotCopied) {
  auto engine = boot(Store(store()).update_dir(0), 0, "device-delta");
  const uint64_t total = engine->storage_bytes();
  const RankLayout& layout = engine->layouts()[0];
  const uint64_t embedding = layout.storages[layout.index_of("model.embed_tokens.weight")].bytes();
  engine->prepare(1);
  const CommitReport report = engine->commit(1);
  EXPECT_EQ(phase_count(report.phases, "commit.delta_apply"), 1);
  EXPECT_LE(phase_bytes(report.phases, "commit.copy"), total - embedding);
  EXPECT_EQ(served(*engine), native(1));
}

INSTANTIATE_TEST_SUITE_P(Llama, CpuHomesDeviceDelta,
                         ::testing::Values(std::make_tuple(std::string("llama-tiny-bf16"), std::string("device-delta"))),
                         test::PairParamName());

}  // namespace
}  // namespace wsb
