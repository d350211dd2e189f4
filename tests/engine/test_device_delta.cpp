// cpu mode with the commit strategy "device-delta" on the CPU backend (the staging area in host memory, so the whole
// path runs without a GPU): for every tiny preset at TP 2, v0 -> v1 -> v3 commits stage and apply the changed
// words of the sparse storages and copy only the rest, and every rank's checksums and the probe fingerprint equal a
// fresh native load; a staged pack corrupted after prepare is dropped before the pause (full copy, still exact); live
// storages that differ from the live image are never patched; a dense delta copies everything, and the digests of
// its storages, taken after the commit, let the next update's live check pass.
#include <gtest/gtest.h>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;

using test::Served;

uint64_t phase_bytes(const std::vector<PhaseRecord>& phases, const std::string& name, int* count = nullptr) {
  uint64_t bytes = 0;
  for (const auto& p : phases) {
    if (p.name != name) continue;
    bytes += p.bytes;
    if (count != nullptr) ++*count;
  }
  return bytes;
}

class DeviceDeltaCommit : public ::testing::TestWithParam<std::string> {
 protected:
  void publish(std::optional<double> density = std::nullopt) {
    PublishOptions options;
    options.store = store();
    options.first_version = 0;
    options.last_version = 3;
    options.seed = kSeed;
    options.density = density;
    wsb::publish(test::tiny_profile(GetParam()), options);
    density_ = density;
  }
  std::filesystem::path store() const { return dir_ / "store"; }
  /// An engine natively loaded from `checkpoint`; its load report goes to `load` when given.
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version, const char* strategy,
                               LoadReport* load = nullptr) {
    EngineOptions options{test::tiny_profile(GetParam()), 2, test::sync_of("cpu"), store(),
                          dir_ / ("work" + std::to_string(n_++)), 2};
    options.sync.cpu.commit_strategy = parse_commit_strategy(strategy);
    auto engine = std::make_unique<Engine>(options);
    LoadReport report = engine->load_native(checkpoint, version);
    if (load != nullptr) *load = std::move(report);
    return engine;
  }
  Served served(Engine& e) { return test::served(e, "device delta probe"); }
  Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    write_full_checkpoint(test::tiny_profile(GetParam()), kSeed, version, density_, dir);
    return served(*boot(dir, version, "full"));
  }

  test::TempDir dir_;
  int n_ = 0;
  std::optional<double> density_;
};

TEST_P(DeviceDeltaCommit, StagedCommitsEqualNativeLoads) {
  publish();
  auto engine = boot(Store(store()).update_dir(0), 0, "device-delta");
  const uint64_t total = engine->storage_bytes();
  const auto pointers = engine->storage_pointers();
  for (uint32_t target : {1u, 3u}) {
    SCOPED_TRACE(target);
    const PrepareReport prepared = engine->prepare(target);
    // The live storages are checked whole; the pack is recorded while the images are written, so no phase reads
    // a second image set (there is none), and nothing recomputes the images' digests.
    EXPECT_EQ(phase_bytes(prepared.phases, "prepare.delta_verify_live"), total);
    const uint64_t packed = phase_bytes(prepared.phases, "prepare.delta_pack");
    EXPECT_GT(packed, 0u);
    EXPECT_EQ(phase_bytes(prepared.phases, "prepare.delta_upload"), packed);
    int digests = 0;
    phase_bytes(prepared.phases, "prepare.delta_digest", &digests);
    EXPECT_EQ(digests, 0);
    const CommitReport report = engine->commit(target);
    int applies = 0;
    phase_bytes(report.phases, "commit.delta_apply", &applies);
    EXPECT_EQ(applies, 1);
    // The sparse storages were patched, so the full copy moved less than everything (but not nothing: storages
    // whose words are dense, or whose size is not a multiple of 4 bytes, are copied).
    EXPECT_LT(phase_bytes(report.phases, "commit.copy"), total);
    EXPECT_EQ(served(*engine), native(target));
  }
  EXPECT_EQ(engine->storage_pointers(), pointers);
}

TEST_P(DeviceDeltaCommit, TheNativeLoadReservesTheStagingAreaOnlyForDeviceDelta) {
  publish();
  for (const char* strategy : {"device-delta", "full"}) {
    SCOPED_TRACE(strategy);
    LoadReport load;
    boot(Store(store()).update_dir(0), 0, strategy, &load);
    int reservations = 0;
    phase_bytes(load.phases, "load.delta_staging", &reservations);
    EXPECT_EQ(reservations, std::string(strategy) == "full" ? 0 : 1);
  }
}

TEST_P(DeviceDeltaCommit, ACorruptedStagedPackIsDroppedBeforeThePause) {
  publish();
  auto engine = boot(Store(store()).update_dir(0), 0, "device-delta");
  engine->prepare(1);
  engine->debug_corrupt_staged_delta(16 + 32 + 2);  // inside the first segment record's address
  const CommitReport report = engine->commit(1);
  int rejected = 0, applies = 0;
  phase_bytes(report.phases, "commit.delta_rejected", &rejected);
  phase_bytes(report.phases, "commit.delta_apply", &applies);
  EXPECT_EQ(rejected, 1);
  EXPECT_EQ(applies, 0);
  EXPECT_EQ(phase_bytes(report.phases, "commit.copy"), engine->storage_bytes());
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(DeviceDeltaCommit, LiveBytesThatDifferFromTheLiveImageAreNeverPatched) {
  publish();
  auto engine = boot(Store(store()).update_dir(0), 0, "device-delta");
  engine->debug_flip_storage_byte(1, 0, 3);  // the live storage no longer holds what the live image says
  const PrepareReport prepared = engine->prepare(1);
  int uploads = 0;
  phase_bytes(prepared.phases, "prepare.delta_upload", &uploads);
  EXPECT_EQ(uploads, 0);
  const CommitReport report = engine->commit(1);
  EXPECT_EQ(phase_bytes(report.phases, "commit.copy"), engine->storage_bytes());
  EXPECT_EQ(served(*engine), native(1));  // the full copy repaired the flipped byte
  engine->prepare(3);  // and the next update is staged again
  const CommitReport next = engine->commit(3);
  EXPECT_LT(phase_bytes(next.phases, "commit.copy"), engine->storage_bytes());
  EXPECT_EQ(served(*engine), native(3));
}

TEST_P(DeviceDeltaCommit, ADenseDeltaCopiesEverything) {
  publish(1.0);  // every value moves: every changed storage's words are dense
  auto engine = boot(Store(store()).update_dir(0), 0, "device-delta");
  const auto before = engine->storage_checksums();
  engine->prepare(1);
  const CommitReport report = engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
  // Copied in full: every storage that changed, and the unchanged ones that are not word-addressable; only the
  // unchanged others (e.g. per-expert input scales the publisher keeps) go as empty staged segments.
  const auto after = engine->storage_checksums();
  uint64_t expected = 0;
  const auto pointers = engine->storage_pointers();
  for (size_t r = 0; r < pointers.size(); ++r) {
    for (const auto& p : pointers[r]) {
      if (before[r].at(p.name) != after[r].at(p.name) || p.bytes % 4 != 0) expected += p.bytes;
    }
  }
  EXPECT_EQ(phase_bytes(report.phases, "commit.copy"), expected);
  EXPECT_GT(expected, engine->storage_bytes() * 99 / 100);
  // The dense storages' digests were taken from their new bytes after that commit, in the background: the next
  // prepare waits for them once, and the live check, which compares them with the device bytes, passes (it is
  // only then that the packs are uploaded).
  const PrepareReport next = engine->prepare(2);
  int waits = 0, uploads = 0;
  phase_bytes(next.phases, "prepare.delta_digest_wait", &waits);
  phase_bytes(next.phases, "prepare.delta_upload", &uploads);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(uploads, 1);
  engine->commit(2);
  EXPECT_EQ(served(*engine), native(2));
}

INSTANTIATE_TEST_SUITE_P(Tiny, DeviceDeltaCommit,
                         ::testing::ValuesIn(test::tiny_presets()),
                         test::StringParamName());

}  // namespace
}  // namespace wsb
