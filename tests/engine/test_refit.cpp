// The refit mode end to end on the CPU backend: one weight-version step per refit however many aligned batches
// it streams, rank images byte-identical to the ordinary loader over a native load, probes during a refit served
// at one version, and bad setups refused with the live weights untouched. Each transport runs: threads, a forked
// shm sender process, and the cuda-ipc path (an exec'd `wsbench refit-sender`) over the host stand-in of device
// memory; on a GPU machine the cuda-ipc refit also runs on the cuda backend with real CUDA IPC.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "engine/host_storages.hpp"
#include "core/errors.hpp"
#include "models/forward/forward.hpp"
#include "modes/refit/host_device_ipc.hpp"
#include "modes/refit/refit_mode.hpp"
#include "modes/refit/sender.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;
constexpr int kTp = 2;

GenerateRequest probe() {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("refit probe");
  r.max_new_tokens = 4;
  return r;
}

/// Bucket size that makes the tiny model stream in many buckets: the largest shard, so every weight fits.
uint64_t smallest_bucket(const refit::RankShards& shards) {
  uint64_t largest = 0;
  for (const auto& rank : shards) {
    for (const auto& s : rank) largest = std::max(largest, s.spec.bytes());
  }
  return largest;
}

/// Aligned batches the receivers must form: the global order split at every rank's bucket boundary.
uint64_t expected_batches(const refit::RankShards& shards, uint64_t bucket) {
  std::set<size_t> cuts;
  for (size_t r = 0; r < shards.size(); ++r) {
    std::vector<refit::ShardWeight> weights;
    std::vector<std::vector<uint8_t>> bytes;
    for (const auto& s : shards[r]) bytes.emplace_back(s.spec.bytes());
    for (size_t i = 0; i < shards[r].size(); ++i) weights.push_back({shards[r][i].spec, bytes[i]});
    size_t end = 0;
    for (const auto& bucket_entries : refit::plan_buckets(static_cast<int>(r), weights, bucket)) {
      end += bucket_entries.size();
      cuts.insert(end);
    }
  }
  return cuts.size();
}

class RefitModeTest : public ::testing::Test {
 public:
  std::string transport_ = "inproc";
 protected:
  void SetUp() override { test::publish_tiny(store(), 3, kSeed); }
  std::filesystem::path store() const { return dir_ / "store"; }
  SyncContext context(uint64_t bucket) const {
    SyncContext c{test::tiny_profile(), build_rank_layouts(test::tiny_profile(), kTp), store(), dir_ / "work", 2};
    c.sync = SyncOptions{SyncModeKind::Refit, {}, {parse_refit_transport(transport_), bucket}};
    if (transport_ == "cuda-ipc") {
      c.device_ipc = &refit::host_device_ipc();
      c.rank_devices.assign(kTp, 0);
    }
    return c;
  }
  EngineOptions engine_options(uint64_t bucket, const std::string& name) const {
    EngineOptions o{test::tiny_profile(), kTp, test::sync_of("refit"), store(), dir_ / name, 2};
    o.sync.refit = {parse_refit_transport(transport_), bucket};
    if (transport_ == "cuda-ipc") o.refit_device_ipc = &refit::host_device_ipc();
    return o;
  }
  test::TempDir dir_;
};

/// The same refit over each transport: threads of this process, or a forked sender process through shared memory.
class RefitTransports : public RefitModeTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    transport_ = GetParam();
#if defined(__SANITIZE_THREAD__)
    // The shm sender process is forked from this multi-threaded test and starts its rank threads: TSan's runtime
    // does not support that child ("dup thread with used id"). The transport's own suite forks from one thread.
    if (transport_ == "shm") GTEST_SKIP() << "ThreadSanitizer cannot run threads in a child of a multi-threaded fork";
    if (transport_ == "cuda-ipc") GTEST_SKIP() << "the TSan build does not build wsbench, the cuda-ipc sender process";
#endif
    RefitModeTest::SetUp();
  }
};

TEST_P(RefitTransports, OneVersionStepPerRefitAcrossManyBatchesAndImagesEqualTheOrdinaryLoader) {
  const ModelProfile profile = test::tiny_profile();
  const auto layouts = build_rank_layouts(profile, kTp);
  const auto shards = refit::plan_rank_shards(profile.canonical_tensors(), layouts);
  const uint64_t bucket = smallest_bucket(shards);
  refit::RefitMode mode(context(bucket));
  EXPECT_EQ(mode.bucket_bytes(), bucket);
  PhaseLog log;
  mode.on_native_load(CheckpointReader(Store(store()).update_dir(0)), 0, log);
  mode.prepare(0, 2, log);  // a catch-up over two deltas is still one refit

  EXPECT_EQ(mode.refits(), 1u);
  EXPECT_EQ(mode.prepared_version(), 2u);
  const uint64_t batches = expected_batches(shards, bucket);
  EXPECT_GE(batches, 5u);  // many batches, one refit
  EXPECT_EQ(mode.last_batches(), batches);
  uint64_t shard_bytes = 0;
  for (const auto& rank : shards) {
    for (const auto& s : rank) shard_bytes += s.spec.bytes();
  }
  EXPECT_EQ(log.bytes("prepare.stream"), shard_bytes);
  // prepare.stream_start: once, within prepare.stream, no bytes of its own.
  size_t starts = 0;
  for (const PhaseRecord& p : log.records()) {
    if (p.name != "prepare.stream_start") continue;
    ++starts;
    EXPECT_EQ(p.bytes, 0u);
    EXPECT_EQ(p.floor, Floor::None);
  }
  EXPECT_EQ(starts, 1u);
  EXPECT_GT(log.seconds("prepare.stream_start"), 0.0);
  EXPECT_LE(log.seconds("prepare.stream_start"), log.seconds("prepare.stream"));

  HostStorages live(layouts);
  mode.preflight(2);
  mode.commit(live, log);
  const auto reference_dir = dir_ / "full-v2";
  write_full_checkpoint(profile, kSeed, 2, std::nullopt, reference_dir);
  CheckpointReader reference(reference_dir);
  const CanonicalLookup lookup = [&](const std::string& name) { return reference.data(name); };
  for (int r = 0; r < kTp; ++r) {
    for (size_t s = 0; s < layouts[r].storages.size(); ++s) {
      std::vector<uint8_t> expected(layouts[r].storages[s].bytes());
      load_storage(layouts[r].storages[s], lookup, expected);
      const auto got = live.storage(r, s);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end()))
          << "rank " << r << " storage " << layouts[r].storages[s].name;
    }
  }

  mode.prepare(2, 3, log);
  EXPECT_EQ(mode.refits(), 2u);
  EXPECT_EQ(mode.prepared_version(), 3u);
}

TEST_P(RefitTransports, ProbesDuringTheRefitAreServedAtTheOldVersionAndCommitBumpsItOnce) {
  const auto shards =
      refit::plan_rank_shards(test::tiny_profile().canonical_tensors(), build_rank_layouts(test::tiny_profile(), kTp));
  Engine engine(engine_options(smallest_bucket(shards), "work"));
  engine.load_native(Store(store()).update_dir(0), 0);
  const std::string v0 = fingerprint(engine.generate(probe()));
  std::atomic<bool> done{false};
  std::vector<std::pair<uint32_t, std::string>> seen;
  std::thread prober([&] {
    while (!done.load()) {
      const GenerateResponse r = engine.generate(probe());
      seen.emplace_back(r.weight_version, fingerprint(r));
    }
  });
  engine.prepare(3);
  done = true;
  prober.join();
  ASSERT_FALSE(seen.empty());
  for (const auto& [version, fp] : seen) {
    EXPECT_EQ(version, 0u);
    EXPECT_EQ(fp, v0);
  }
  EXPECT_EQ(engine.weight_version(), 0u);
  engine.commit(3);
  EXPECT_EQ(engine.weight_version(), 3u);  // v0 -> v3 in one step, never 1 or 2

  const auto native_dir = dir_ / "full-v3";
  write_full_checkpoint(test::tiny_profile(), kSeed, 3, std::nullopt, native_dir);
  Engine native(engine_options(0, "native"));
  native.load_native(native_dir, 3);
  EXPECT_EQ(engine.storage_checksums(), native.storage_checksums());
  EXPECT_EQ(fingerprint(engine.generate(probe())), fingerprint(native.generate(probe())));
}

TEST_P(RefitTransports, AnUnpublishedTargetIsRejectedWithNothingStreamedAndTheNextRefitStreams) {
  // cuda-ipc opens its link (starts the sender process) before the trainer finds the target missing: the process
  // is wound down unstarted and the next refit starts a fresh one.
  const ModelProfile profile = test::tiny_profile();
  const auto shards = refit::plan_rank_shards(profile.canonical_tensors(), build_rank_layouts(profile, kTp));
  refit::RefitMode mode(context(smallest_bucket(shards)));
  PhaseLog log;
  mode.on_native_load(CheckpointReader(Store(store()).update_dir(0)), 0, log);
  EXPECT_EQ(test::error_message([&] { mode.prepare(0, 9, log); }, ErrorKind::Missing),
            "version 000009 not published in " + store().string());
  EXPECT_EQ(mode.prepared_version(), std::nullopt);
  EXPECT_EQ(mode.refits(), 0u);
  EXPECT_EQ(log.seconds("prepare.stream"), 0.0);
  mode.prepare(0, 1, log);
  EXPECT_EQ(mode.prepared_version(), 1u);
  EXPECT_EQ(mode.refits(), 1u);
  uint64_t shard_bytes = 0;
  for (const auto& rank : shards) {
    for (const auto& s : rank) shard_bytes += s.spec.bytes();
  }
  EXPECT_EQ(log.bytes("prepare.stream"), shard_bytes);
}

TEST_F(RefitModeTest, BucketSmallerThanAWeightIsRefusedAtSetupNamingTheWeightAndTheSizeNeeded) {
  const auto shards =
      refit::plan_rank_shards(test::tiny_profile().canonical_tensors(), build_rank_layouts(test::tiny_profile(), kTp));
  const uint64_t needed = smallest_bucket(shards);
  std::string largest;
  for (const auto& s : shards[0]) {
    if (s.spec.bytes() == needed && largest.empty()) largest = s.spec.name;
  }
  ASSERT_FALSE(largest.empty());  // rank 0 holds a largest shard (the embedding rows)
  for (const uint64_t bucket : {uint64_t{1}, needed - 1}) {
    test::expect_error([&] { Engine engine(engine_options(bucket, "work")); }, ErrorKind::Mismatch,
                       {fmt::format("refit mode: bucket_size_bytes {} B is smaller than weight '{}' ({} B on rank 0, "
                                    "the largest weight of any rank); use a bucket of at least {} B",
                                    bucket, largest, needed, needed)});
  }
}

TEST_F(RefitModeTest, BucketRefusalNamesTheLargestWeightNotTheFirstMisfit) {
  // The size named is the bucket that works, so one retry suffices.
  auto slice = [](const std::string& name, int64_t elements) {
    refit::ShardSlice s;
    s.spec = TensorSpec{name, DType::U8, Shape{elements}};
    return s;
  };
  const refit::RankShards shards = {{slice("a", 100), slice("b", 300)}, {slice("c", 200), slice("d", 700)}};
  test::expect_error([&] { refit::check_bucket_fits(150, shards); }, ErrorKind::Mismatch,
                     {"refit mode: bucket_size_bytes 150 B is smaller than weight 'd' (700 B on rank 1, the largest "
                      "weight of any rank); use a bucket of at least 700 B"});
  EXPECT_EQ(refit::check_bucket_fits(700, shards), 700u);
}

TEST_F(RefitModeTest, UnknownTransportIsRefusedByItsName) {
  test::expect_error([&] { parse_refit_transport("carrier-pigeon"); }, ErrorKind::Format,
                     {"unknown transport 'carrier-pigeon' (inproc, shm, cuda-ipc)"});
}

TEST_F(RefitModeTest, ASenderProcessThatFailsBeforeStreamingReportsItsStatusAndLastStderrLine) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the TSan build does not build wsbench, the cuda-ipc sender process";
#endif
  // A stand-in sender executable that fails at setup, as a refit-sender that finds no GPU would.
  const auto exe = dir_ / "failing-sender";
  {
    std::ofstream script(exe);
    script << "#!/bin/sh\necho 'starting' >&2\necho 'sender setup failed: no GPU 7' >&2\nexit 3\n";
  }
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  transport_ = "cuda-ipc";
  SyncContext c = context(0);
  c.refit_sender_exe = exe;
  refit::RefitMode mode(std::move(c));
  PhaseLog log;
  mode.on_native_load(CheckpointReader(Store(store()).update_dir(0)), 0, log);
  const std::string what = test::error_message([&] { mode.prepare(0, 1, log); }, ErrorKind::Io);
  EXPECT_TRUE(std::regex_match(what, std::regex("refit: rank [01]: transport failed mid-stream: sender process exited "
                                                "before finishing the stream \\(refit: sender process [0-9]+ exited "
                                                "with status 3: sender setup failed: no GPU 7\\)")))
      << what;
  EXPECT_EQ(mode.prepared_version(), std::nullopt);
}

TEST_F(RefitModeTest, CudaIpcOnTheCpuBackendIsRefusedAtSetup) {
  EngineOptions o = engine_options(0, "work");
  o.sync.refit.transport = RefitTransport::CudaIpc;
  test::expect_error([&] { Engine engine(o); }, ErrorKind::Mismatch,
                     {"refit mode: transport 'cuda-ipc' needs the cuda backend (device memory to export and import, one "
                      "GPU per TP rank); this engine gives no device IPC for 2 ranks"});
}

TEST_F(RefitModeTest, CudaIpcOnTheCudaBackendEqualsANativeLoad) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  // Real CUDA IPC: `wsbench refit-sender` exports device rings, this process imports them.
  EngineOptions o = engine_options(0, "work");
  o.backend = "cuda";
  o.sync.refit.transport = RefitTransport::CudaIpc;
  const auto shards =
      refit::plan_rank_shards(test::tiny_profile().canonical_tensors(), build_rank_layouts(test::tiny_profile(), kTp));
  o.sync.refit.bucket_bytes = smallest_bucket(shards);  // many buckets through each ring
  Engine engine(o);
  engine.load_native(Store(store()).update_dir(0), 0);
  engine.prepare(3);
  EXPECT_EQ(engine.weight_version(), 0u);
  engine.commit(3);
  EXPECT_EQ(engine.weight_version(), 3u);
  const auto native_dir = dir_ / "full-v3";
  write_full_checkpoint(test::tiny_profile(), kSeed, 3, std::nullopt, native_dir);
  EngineOptions n = engine_options(0, "native");
  n.backend = "cuda";
  Engine native(n);
  native.load_native(native_dir, 3);
  EXPECT_EQ(engine.storage_checksums(), native.storage_checksums());
  EXPECT_EQ(fingerprint(engine.generate(probe())), fingerprint(native.generate(probe())));
}

INSTANTIATE_TEST_SUITE_P(Transports, RefitTransports,
                         ::testing::Values(std::string("inproc"), std::string("shm"), std::string("cuda-ipc")),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name == "cuda_ipc" ? std::string("cuda_ipc_host") : name;
                         });

}  // namespace
}  // namespace wsb
