// The device side of the device-delta commit (engine/cuda/delta_ops.hpp through DeviceStorages): the device
// digest of a storage equals the host digest64 of the same bytes for every tail length; a staged pack applied by
// the scatter kernel leaves every storage equal to the new bytes (and touches no other storage); a staged byte
// flipped afterwards is reported by staged_deltas_intact; a pack beyond the area is refused. GPU only.
#include <gtest/gtest.h>

#include <random>

#include "engine/cuda/device_storages.hpp"
#include "core/digest64.hpp"
#include "core/errors.hpp"
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
  for (size_t i = 0; i < sizes.size(); ++i) {
    live[i].resize(static_cast<size_t>(sizes[i]));
    for (auto& b : live[i]) b = static_cast<uint8_t>(rng());
    storages->write(0, i, 0, live[i]);
  }
  storages->synchronize();
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(storages->live_digest(0, i), digest64(live[i])) << sizes[i];

  // Deltas for the word-addressable storages 2..5 (storage 5 unchanged: an empty segment).
  std::vector<StorageDelta> deltas(4);
  std::vector<const StorageDelta*> ptrs;
  for (size_t k = 0; k < 4; ++k) {
    const size_t i = k + 2;
    next[i] = live[i];
    if (i != 5) {
      for (size_t c = 0; c < next[i].size() / 100 + 1; ++c) next[i][rng() % next[i].size()] ^= 0x5A;
    }
    deltas[k].rank = 0;
    deltas[k].index = i;
    uint64_t changed = 0;
    EXPECT_EQ(diff_storage(live[i], next[i], next[i].size(), deltas[k], &changed), digest64(live[i]));
    ptrs.push_back(&deltas[k]);
  }
  storages->stage_deltas(ptrs);
  EXPECT_TRUE(storages->staged_deltas_intact());
  storages->apply_staged_deltas();
  storages->synchronize();
  for (size_t i = 0; i < sizes.size(); ++i) {
    Bytes now(static_cast<size_t>(sizes[i]));
    storages->read(0, i, now);
    EXPECT_EQ(now, i >= 2 ? next[i] : live[i]) << "storage " << i;
  }
  storages->corrupt_staged_delta(16 + 32 * 4 + 1);  // a word index
  EXPECT_FALSE(storages->staged_deltas_intact());

  // A pack larger than the area is refused, naming both sizes.
  StorageDelta big;
  big.rank = 0;
  big.index = 4;
  big.storage_bytes = 3 << 20;
  big.positions.assign(200000, 0);
  big.values.assign(200000, 0);
  const StorageDelta* one[] = {&big};
  test::expect_error([&] { storages->stage_deltas(one); }, ErrorKind::Resource,
                     {"a pack of 1600048 bytes exceeds the 1048576 byte area"});
}

}  // namespace
}  // namespace wsb
