// The device side of the device-delta commit (engine/cuda/delta_ops.hpp through DeviceStorages): the device
// digest of a storage equals the host digest64 of the same bytes for every tail length, one by one and batched; a
// recorded pack (modes/sync/delta_recorder.hpp) applied by the scatter kernel leaves every storage it covers equal
// to the new bytes (and touches no other storage); a staged byte flipped afterwards is reported by
// staged_deltas_intact; a pack beyond the area is refused; the area is allocated by reserve_delta_staging, once,
// and not again by the first stage. GPU only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/device_storages.hpp"
#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/sync/delta_recorder.hpp"
#include "modes/sync/staged_delta.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/gpu_support.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

RankLayout layout_of(const std::vector<int64_t>& sizes) {
  RankLayout layout;
  for (size_t i = 0; i < sizes.size(); ++i) {
    RuntimeStorageSpec spec;
    spec.name = "s" + std::to_string(i);
    spec.dtype = DType::U8;
    spec.shape = {sizes[i]};
    spec.gathered_shape = spec.shape;
    layout.storages.push_back(spec);
  }
  return layout;
}

TEST(DeviceDelta, DigestsStagingAndApplyMatchTheHost) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int64_t> sizes{1, 7, 12, 4096 + 4, 3 << 20, 64};
  DeviceStorageOptions options;
  options.device_count = 1;
  options.delta_staging_bytes = 1 << 20;
  auto storages = make_device_storages({layout_of(sizes)}, options);
  std::mt19937_64 rng(5);
  std::vector<Bytes> live(sizes.size()), next(sizes.size());
  std::vector<StorageIndex> all;
  for (size_t i = 0; i < sizes.size(); ++i) {
    live[i].resize(static_cast<size_t>(sizes[i]));
    for (auto& b : live[i]) b = static_cast<uint8_t>(rng());
    storages->write(0, i, 0, live[i]);
    all.push_back({0, i});
  }
  storages->synchronize();
  const std::vector<uint64_t> digests = storages->live_digests(all);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(storages->live_digest(0, i), digest64(live[i])) << sizes[i];
    EXPECT_EQ(digests[i], digest64(live[i])) << sizes[i];
  }

  // The recorder finds the changes of storages 2..5 (storage 5 unchanged) against host copies of the live bytes;
  // its pack, staged and applied on the device, leaves every storage it covers at the new bytes.
  std::vector<Bytes> image = live;
  std::vector<DeltaStorage> recorded;
  for (size_t i = 0; i < sizes.size(); ++i) recorded.push_back({image[i], 0, storages->delta_address(0, i)});
  DeltaRecorder recorder({1 << 20}, nullptr);
  recorder.begin(recorded);
  for (size_t i = 0; i < sizes.size(); ++i) {
    next[i] = live[i];
    if (i >= 2 && i != 5) {
      for (size_t c = 0; c < next[i].size() / 100 + 1; ++c) next[i][rng() % next[i].size()] ^= 0x5A;
    }
    recorder.copy(i, 0, next[i]);
  }
  const std::vector<DeltaChanges> changes = recorder.finish();
  std::vector<bool> include(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) include[i] = changes[i].changed() && !changes[i].incomplete;
  EXPECT_EQ(include, (std::vector<bool>{false, false, false, true, true, false}));  // 12 bytes: dense
  const auto pack = recorder.pack(0, include);
  ASSERT_TRUE(pack.has_value());
  const StagedPack staged[] = {{storages->device_of(0), pack->bytes, pack->digest}};
  storages->stage_packs(staged);
  EXPECT_TRUE(storages->staged_deltas_intact());
  storages->apply_staged_deltas();
  storages->synchronize();
  for (size_t i = 0; i < sizes.size(); ++i) {
    Bytes now(static_cast<size_t>(sizes[i]));
    storages->read(0, i, now);
    EXPECT_EQ(now, include[i] ? next[i] : live[i]) << "storage " << i;
  }
  storages->corrupt_staged_delta(16 + 3);  // inside the first entry
  EXPECT_FALSE(storages->staged_deltas_intact());

  // A pack larger than the area is refused, naming both sizes, and leaves nothing staged.
  Bytes big(pack_bytes(0, 200000));
  const uint64_t header[2] = {0, 200000};
  std::memcpy(big.data(), header, sizeof header);
  const StagedPack too_big[] = {{storages->device_of(0), big, digest64(big)}};
  test::expect_error([&] { storages->stage_packs(too_big); }, ErrorKind::Resource,
                     {"a pack of 1600016 bytes exceeds the 1048576 byte area"});
  EXPECT_TRUE(storages->staged_deltas_intact());  // nothing staged
}

TEST(DeviceDelta, TheAreaIsAllocatedOnceByTheReservationNotByTheFirstStage) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  // Free memory is the device's, shared with any test process running beside this one: the area is large next to
  // the slack allowed for them.
  constexpr int64_t kArea = 1ll << 30, kSlack = 64ll << 20;
  DeviceStorageOptions options;
  options.device_count = 1;
  options.delta_staging_bytes = kArea;
  auto storages = make_device_storages({layout_of({4096})}, options);
  storages->synchronize();
  const int device = storages->device_of(0);
  auto free_now = [&] {
    uint64_t free_bytes = 0, total = 0;
    cuda_ops::memory_info(device, &free_bytes, &total);
    return static_cast<int64_t>(free_bytes);
  };
  const int64_t before = free_now();
  storages->reserve_delta_staging();
  const int64_t reserved = free_now();
  EXPECT_GE(before - reserved, kArea - kSlack);
  storages->reserve_delta_staging();
  EXPECT_LT(std::abs(free_now() - reserved), kArea / 2);  // not allocated twice

  Bytes image(4096, 0);
  DeltaRecorder recorder({1 << 20}, nullptr);
  recorder.begin({DeltaStorage{image, 0, storages->delta_address(0, 0)}});
  Bytes next(4096, 0);
  next[100] = 1;
  recorder.copy(0, 0, next);
  recorder.finish();
  const auto pack = recorder.pack(0, {true});
  ASSERT_TRUE(pack.has_value());
  const StagedPack staged[] = {{device, pack->bytes, pack->digest}};
  storages->stage_packs(staged);
  EXPECT_LT(std::abs(free_now() - reserved), kArea / 2);  // the first stage allocated no area of its own
  storages->apply_staged_deltas();
  storages->synchronize();
  Bytes out(4096);
  storages->read(0, 0, out);
  EXPECT_EQ(out, next);
}

}  // namespace
}  // namespace wsb
