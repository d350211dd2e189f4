// cpu mode (modes/cpu/cpu_mode.hpp) with canonical tensors kept in its rank images: at TP 1 the llama preset's
// canonical image keeps no bytes of its own, and a native load that stages a storage holding canonical tensors
// leaves the mode unable to prepare until its canonical image is loaded again (that load could have failed part
// way, leaving those tensors at another version). A home the native load staged is not copied again by the
// canonical load.
#include <gtest/gtest.h>

#include "modes/cpu/cpu_mode.hpp"
#include "publication/store.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

SyncContext context_of(const ModelProfile& profile, int tp, const std::filesystem::path& store, CommitStrategy strategy) {
  SyncContext context;
  context.profile = profile;
  context.layouts = build_rank_layouts(profile, tp);
  context.store = store;
  context.threads = 2;
  context.sync = test::sync_of("cpu");
  context.sync.cpu.commit_strategy = strategy;
  return context;
}

TEST(CpuModeHomes, AtTp1TheLlamaCanonicalImageKeepsNothingOfItsOwn) {
  const ModelProfile profile = test::tiny_profile();
  test::TempDir dir;
  const CpuMode tp1(context_of(profile, 1, dir / "store", CommitStrategy::Full));
  EXPECT_EQ(tp1.memory().canonical_bytes, 0u);
  EXPECT_EQ(tp1.memory().rank_image_bytes, RankImage(build_rank_layouts(profile, 1)[0]).bytes());
  // At TP 2 only the norms live in rank 0's image.
  const CpuMode tp2(context_of(profile, 2, dir / "store", CommitStrategy::Full));
  uint64_t expected = 0;
  for (const TensorSpec& t : profile.canonical_tensors()) {
    if (t.name.find("norm") == std::string::npos) expected = align_up(expected, kStorageAlignment) + t.bytes();
  }
  EXPECT_EQ(tp2.memory().canonical_bytes, expected);
}

TEST(CpuModeHomes, StagingAHomeInvalidatesTheCanonicalImageUntilItIsLoadedAgain) {
  const ModelProfile profile = test::tiny_profile();
  test::TempDir dir;
  test::publish_tiny(dir / "store", 1);
  // device-delta offers its images to the native load on any backend.
  CpuMode mode(context_of(profile, 1, dir / "store", CommitStrategy::DeviceDelta));
  const RankLayout layout = build_rank_layouts(profile, 1)[0];
  const size_t embed = layout.index_of("model.embed_tokens.weight");
  CheckpointReader v0(Store(dir / "store").update_dir(0));
  PhaseLog log;
  mode.on_native_load(v0, 0, log);
  ASSERT_FALSE(mode.native_load_staging(0, embed, layout.storages[embed].bytes()).empty());
  test::expect_error([&] { mode.prepare(0, 1, log); }, ErrorKind::State,
                     {"cpu mode: prepare before the engine's native load"});
  mode.on_native_load(v0, 0, log);
  mode.prepare(0, 1, log);
  EXPECT_EQ(mode.prepared_version(), std::optional<uint32_t>(1));
  EXPECT_EQ(mode.canonical_version(), 1u);
}

uint64_t phase_bytes(const PhaseLog& log, const std::string& name) {
  uint64_t bytes = 0;
  for (const PhaseRecord& r : log.records()) {
    if (r.name == name) bytes += r.bytes;
  }
  return bytes;
}

TEST(CpuModeHomes, TheCanonicalLoadCopiesOnlyWhatTheNativeLoadDidNotStage) {
  const ModelProfile profile = test::tiny_profile();
  test::TempDir dir;
  test::publish_tiny(dir / "store", 1);
  CheckpointReader v0(Store(dir / "store").update_dir(0));
  const CanonicalLookup lookup = [&](const std::string& name) { return v0.data(name); };
  const RankLayout layout = build_rank_layouts(profile, 1)[0];
  for (const CommitStrategy strategy : {CommitStrategy::DeviceDelta, CommitStrategy::Full}) {
    CpuMode mode(context_of(profile, 1, dir / "store", strategy));
    // The native load as the engine runs it: each storage into the span the mode offers, if any.
    size_t staged = 0;
    for (size_t s = 0; s < layout.storages.size(); ++s) {
      const auto span = mode.native_load_staging(0, s, layout.storages[s].bytes());
      if (span.empty()) continue;
      load_storage(layout.storages[s], lookup, span);
      ++staged;
    }
    PhaseLog log;
    mode.on_native_load(v0, 0, log);
    // device-delta staged every storage, all of them homes at TP 1: nothing is left to copy. The full copy on the
    // CPU backend (images not pinned) staged none: everything is copied.
    const bool device_delta = strategy == CommitStrategy::DeviceDelta;
    EXPECT_EQ(staged, device_delta ? layout.storages.size() : 0u);
    EXPECT_EQ(phase_bytes(log, "load.canonical_image"), device_delta ? 0u : profile.canonical_bytes());
    mode.prepare(0, 1, log);  // its checksums pass only if every home held v0
    EXPECT_EQ(mode.canonical_version(), 1u);
  }
}

}  // namespace
}  // namespace wsb
