// CUDA device storages (engine/cuda/device_storages.hpp): refusal without a device or with bad options (runs
// everywhere); on a GPU, exact-byte round trips of random data through chunked multi-stream writes (odd sizes,
// chunks smaller than a storage, writes at offsets), zero fill, stable and distinct addresses laid out like a rank
// image, out-of-range errors naming the storage, flip_byte, and a too-large layout refused before allocating.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/cuda/pinned.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/rank_image.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

/// A layout of U8 storages of the given byte sizes, named "<prefix><i>".
RankLayout u8_layout(int rank, int tp, const std::vector<int64_t>& sizes, const std::string& prefix = "s") {
  RankLayout layout;
  layout.rank = rank;
  layout.tp = tp;
  for (size_t i = 0; i < sizes.size(); ++i) {
    RuntimeStorageSpec spec;
    spec.name = prefix + std::to_string(i);
    spec.dtype = DType::U8;
    spec.shape = {sizes[i]};
    spec.gathered_shape = spec.shape;
    layout.storages.push_back(spec);
  }
  return layout;
}

std::vector<uint8_t> read_all(const RuntimeStorages& s, int rank, size_t index) {
  std::vector<uint8_t> out(s.storage_bytes(rank, index));
  s.read(rank, index, out);
  return out;
}

// ---- everywhere ----

TEST(DeviceStoragesNoDevice, RefusedWithAClearMessage) {
  if (test::have_gpu()) GTEST_SKIP() << "a device is present";
  const std::vector<RankLayout> layouts = {u8_layout(0, 1, {4096})};
  if (!cuda_ops::built()) {
    test::expect_error([&] { make_device_storages(layouts, {}); }, ErrorKind::Resource,
                       {"device storages: this wsbench was built without CUDA", "needs a CUDA build and a device"});
  } else {
    test::expect_error([&] { make_device_storages(layouts, {}); }, ErrorKind::Resource,
                       {"no CUDA device: the cuda backend needs one"});
  }
}

TEST(DeviceStoragesOptions, BadOptionsRefusedBeforeTouchingADevice) {
  if (!cuda_ops::built()) GTEST_SKIP() << "built without CUDA: refused for that first";
  const std::vector<RankLayout> layouts = {u8_layout(0, 1, {4096})};
  DeviceStorageOptions o;
  o.chunk_bytes = 0;
  test::expect_error([&] { make_device_storages(layouts, o); }, ErrorKind::Mismatch,
                     {"chunk_bytes 0 must be > 0, copy_streams 2 >= 1, device_count 0 >= 0"});
  o = {};
  o.copy_streams = 0;
  test::expect_error([&] { make_device_storages(layouts, o); }, ErrorKind::Mismatch, {"copy_streams 0 >= 1"});
  o = {};
  o.device_count = -1;
  test::expect_error([&] { make_device_storages(layouts, o); }, ErrorKind::Mismatch, {"device_count -1 >= 0"});
}

// ---- GPU ----

class DeviceStoragesGpu : public ::testing::Test {
 protected:
  void SetUp() override { WSBENCH_REQUIRE_GPU(); }
};

TEST_F(DeviceStoragesGpu, MoreDevicesThanVisibleRefused) {
  const int visible = cuda_ops::visible_devices();
  DeviceStorageOptions o;
  o.device_count = visible + 1;
  test::expect_error([&] { make_device_storages({u8_layout(0, 1, {64})}, o); }, ErrorKind::Resource,
                     {fmt::format("device storages: {} CUDA devices requested, {} visible", visible + 1, visible)});
}

TEST_F(DeviceStoragesGpu, ZeroFilledAtAllocation) {
  auto s = make_device_storages({u8_layout(0, 1, {1, 4097, 70000})}, {});
  EXPECT_EQ(s->backend(), "cuda");
  EXPECT_EQ(s->copy_floor(), Floor::H2D);
  for (size_t i = 0; i < 3; ++i) {
    const auto bytes = read_all(*s, 0, i);
    EXPECT_EQ(bytes, std::vector<uint8_t>(bytes.size(), 0)) << "storage " << i;
  }
}

TEST_F(DeviceStoragesGpu, RoundTripExactBytesAcrossChunksAndStreams) {
  // Odd sizes; a 1000-byte chunk spreads every storage above 1000 bytes over all 3 streams, the last chunk short.
  const std::vector<int64_t> sizes = {1, 999, 1000, 1001, 4097, 123457};
  const std::vector<RankLayout> layouts = {u8_layout(0, 2, sizes, "r0."), u8_layout(1, 2, sizes, "r1.")};
  DeviceStorageOptions o;
  o.chunk_bytes = 1000;
  o.copy_streams = 3;
  auto s = make_device_storages(layouts, o);
  ASSERT_EQ(s->tp(), 2);
  std::vector<std::vector<std::vector<uint8_t>>> want(2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(s->storage_count(r), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_EQ(s->storage_bytes(r, i), static_cast<uint64_t>(sizes[i]));
      want[r].push_back(test::random_bytes(static_cast<size_t>(sizes[i]), static_cast<uint32_t>(100 * r + i + 1)));
      s->write(r, i, 0, want[r][i]);
    }
  }
  s->synchronize();
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto got = read_all(*s, r, i);
      EXPECT_EQ(test::fnv1a(got), test::fnv1a(want[r][i])) << "rank " << r << " storage " << i;
      EXPECT_EQ(got, want[r][i]) << "rank " << r << " storage " << i;
    }
  }
}

TEST_F(DeviceStoragesGpu, PinnedSourceRoundTrip) {
  const int64_t bytes = (3 << 20) + 77;
  auto s = make_device_storages({u8_layout(0, 1, {bytes})}, {256 << 10, 4, 0});
  const auto data = test::random_bytes(static_cast<size_t>(bytes), 42);
  HostBuffer pinned(static_cast<size_t>(bytes), 4096, &cuda_host_pinner());
  ASSERT_TRUE(pinned.pinned());
  std::memcpy(pinned.data(), data.data(), data.size());
  s->write(0, 0, 0, pinned.span());
  s->synchronize();
  EXPECT_EQ(read_all(*s, 0, 0), data);
}

TEST_F(DeviceStoragesGpu, WritesAtOffsetsLandInPlace) {
  auto s = make_device_storages({u8_layout(0, 1, {10007, 333})}, {1024, 2, 0});
  std::vector<uint8_t> want(10007, 0);
  const auto a = test::random_bytes(5000, 7), b = test::random_bytes(3001, 8), c = test::random_bytes(1, 9);
  s->write(0, 0, 17, a);     // spans five 1024-byte chunks
  s->write(0, 0, 7006, b);   // ends exactly at the storage end
  s->write(0, 0, 10006, c);  // the last byte
  std::copy(a.begin(), a.end(), want.begin() + 17);
  std::copy(b.begin(), b.end(), want.begin() + 7006);
  want[10006] = c[0];
  s->write(0, 0, 10007, {});  // empty write at the end is in range
  s->synchronize();
  EXPECT_EQ(read_all(*s, 0, 0), want);
  EXPECT_EQ(read_all(*s, 0, 1), std::vector<uint8_t>(333, 0));  // the neighbour is untouched
}

TEST_F(DeviceStoragesGpu, AddressesStableDistinctAndLaidOutLikeARankImage) {
  const std::vector<int64_t> sizes = {100, 1, 64, 65, 4096, 5};
  const std::vector<RankLayout> layouts = {u8_layout(0, 2, sizes), u8_layout(1, 2, sizes)};
  auto s = make_device_storages(layouts, {4096, 2, 0});
  uint64_t total = 0;
  const std::vector<uint64_t> offsets = storage_offsets(layouts[0], &total);
  std::set<uintptr_t> seen;
  std::vector<std::vector<uintptr_t>> before(2);
  for (int r = 0; r < 2; ++r) {
    const uintptr_t base = s->address(r, 0);
    EXPECT_EQ(base % 256, 0u) << "cudaMalloc alignment";
    for (size_t i = 0; i < sizes.size(); ++i) {
      const uintptr_t a = s->address(r, i);
      EXPECT_EQ(a - base, offsets[i]) << "rank " << r << " storage " << i;
      EXPECT_EQ(a % kStorageAlignment, 0u);
      EXPECT_TRUE(seen.insert(a).second) << "address reused: rank " << r << " storage " << i;
      before[r].push_back(a);
    }
  }
  // Ranks' arenas do not overlap: [base, base + total) are disjoint.
  const uintptr_t b0 = s->address(0, 0), b1 = s->address(1, 0);
  EXPECT_TRUE(b0 + total <= b1 || b1 + total <= b0);
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < sizes.size(); ++i) s->write(r, i, 0, test::random_bytes(sizes[i], 5));
  s->synchronize();
  const auto views = s->views();
  ASSERT_EQ(views.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(views[r].device, s->device_of(r));
    EXPECT_EQ(views[r].device, r % cuda_ops::visible_devices());
    ASSERT_EQ(views[r].storages.size(), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(s->address(r, i), before[r][i]) << "address moved after writes";
      EXPECT_EQ(reinterpret_cast<uintptr_t>(views[r].storages[i]), before[r][i]);
      EXPECT_EQ(views[r].bytes[i], static_cast<uint64_t>(sizes[i]));
    }
  }
}

TEST_F(DeviceStoragesGpu, OutOfRangeErrorsNameTheStorage) {
  auto s = make_device_storages({u8_layout(0, 1, {100, 10}, "layer.w")}, {});
  const auto three = test::random_bytes(3, 1);
  test::expect_error([&] { s->write(0, 0, 98, three); }, ErrorKind::Mismatch,
                     {"rank 0 storage 'layer.w0': write of 3 bytes at 98 exceeds 100 bytes"});
  test::expect_error([&] { s->write(0, 1, 11, {}); }, ErrorKind::Mismatch,
                     {"rank 0 storage 'layer.w1': write of 0 bytes at 11 exceeds 10 bytes"});
  test::expect_error([&] { s->write(0, 2, 0, three); }, ErrorKind::Mismatch,
                     {"rank 0: write to storage index 2 out of range (2 storages)"});
  test::expect_error([&] { s->write(1, 0, 0, three); }, ErrorKind::Mismatch,
                     {"device storages: rank 1 out of range (tp 1)"});
  std::vector<uint8_t> small(99);
  test::expect_error([&] { s->read(0, 0, small); }, ErrorKind::Mismatch,
                     {"rank 0 storage 'layer.w0': read into 99 bytes, the storage holds 100"});
  test::expect_error([&] { s->flip_byte(0, 1, 10); }, ErrorKind::Mismatch,
                     {"rank 0 storage 'layer.w1': flip_byte of 1 bytes at 10 exceeds 10 bytes"});
  // Nothing was written by the refused calls.
  EXPECT_EQ(read_all(*s, 0, 0), std::vector<uint8_t>(100, 0));
}

TEST_F(DeviceStoragesGpu, FlipByteXorsExactlyOneBit) {
  auto s = make_device_storages({u8_layout(0, 1, {4099})}, {1000, 2, 0});
  auto want = test::random_bytes(4099, 3);
  s->write(0, 0, 0, want);  // flip_byte must order itself after this in-flight write
  s->flip_byte(0, 0, 4098);
  s->flip_byte(0, 0, 0);
  s->flip_byte(0, 0, 2000);
  s->flip_byte(0, 0, 2000);  // twice: restored
  want[4098] ^= 0x01;
  want[0] ^= 0x01;
  EXPECT_EQ(read_all(*s, 0, 0), want);
}

TEST_F(DeviceStoragesGpu, TooLargeLayoutRefusedBeforeAllocating) {
  uint64_t free_before = 0, total = 0;
  cuda_ops::memory_info(0, &free_before, &total);
  // Rank 0 alone would fit; rank 1 (also on device 0 when it is the only device) cannot.
  const int64_t huge = static_cast<int64_t>(total) + (1ll << 30);
  const std::vector<RankLayout> layouts = {u8_layout(0, 1, {4096}), u8_layout(0, 1, {huge})};
  DeviceStorageOptions o;
  o.device_count = 1;
  uint64_t need = 0, t = 0;
  storage_offsets(layouts[0], &t);
  need += t;
  storage_offsets(layouts[1], &t);
  need += t;
  test::expect_error([&] { make_device_storages(layouts, o); }, ErrorKind::Resource,
                     {"device storages: not enough device memory: device 0 (" + cuda_ops::device_name(0) +
                          "): needs " + std::to_string(need) + " bytes for TP ranks {0, 1}, ",
                      " free"});
  uint64_t free_after = 0;
  cuda_ops::memory_info(0, &free_after, &total);
  // Nothing stayed allocated (other processes may move free memory a little; 64 MiB slack).
  EXPECT_GE(free_after + (64ull << 20), free_before);
}

}  // namespace
}  // namespace wsb
