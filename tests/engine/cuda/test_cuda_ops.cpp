// The thin CUDA wrappers and what sits directly on them: the no-CUDA stand-ins and no-device answers (run
// everywhere), pinned HostBuffers through cuda_host_pinner(), and measure_h2d_floors' entries on a GPU.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/h2d_floor.hpp"
#include "engine/cuda/pinned.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/rank_image.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

TEST(CudaOpsStandIns, WithoutCudaEveryOperationRefuses) {
  if (cuda_ops::built()) GTEST_SKIP() << "CUDA build: the stand-ins are not compiled in";
  EXPECT_EQ(cuda_ops::visible_devices(), 0);
  uint64_t f = 0, t = 0;
  test::expect_error([] { cuda_ops::device_name(0); }, ErrorKind::Resource,
                     {"device name of device 0: built without CUDA"});
  test::expect_error([&] { cuda_ops::memory_info(1, &f, &t); }, ErrorKind::Resource,
                     {"cudaMemGetInfo on device 1: built without CUDA"});
  test::expect_error([] { cuda_ops::device_alloc(0, 64, "arena"); }, ErrorKind::Resource,
                     {"arena: built without CUDA"});
  test::expect_error([] { cuda_ops::stream_create(0, "copy"); }, ErrorKind::Resource, {"copy: built without CUDA"});
  uint8_t byte = 0;
  test::expect_error([&] { cuda_ops::memset_async(0, &byte, 0, 1, nullptr, "zero"); }, ErrorKind::Resource,
                     {"zero: built without CUDA"});
  test::expect_error([&] { cuda_ops::copy_h2d_async(0, &byte, &byte, 1, nullptr, "h2d"); }, ErrorKind::Resource,
                     {"h2d: built without CUDA"});
  test::expect_error([&] { cuda_ops::copy_d2h_async(0, &byte, &byte, 1, nullptr, "d2h"); }, ErrorKind::Resource,
                     {"d2h: built without CUDA"});
  EXPECT_EQ(cuda_ops::stream_synchronize(0, nullptr), "built without CUDA");
  cuda_ops::device_free(0, &byte);       // no-ops, never throw
  cuda_ops::stream_destroy(0, &byte);
  cuda_ops::host_unregister(&byte);
  EXPECT_FALSE(cuda_ops::host_is_pinned(&byte));
}

TEST(CudaOpsNoDevice, QueriesReportNoDevice) {
  if (test::have_gpu()) GTEST_SKIP() << "a device is present";
  EXPECT_EQ(cuda_ops::visible_devices(), 0);
  EXPECT_EQ(cuda_ops::visible_devices(), 0);  // the sticky "no device" error was cleared, not re-reported
  int x = 0;
  EXPECT_FALSE(cuda_ops::host_is_pinned(&x));
  EXPECT_FALSE(is_pinned(&x));
}

TEST(PinnedHostBuffer, RefusalWithoutADeviceNamesTheBytes) {
  if (test::have_gpu()) GTEST_SKIP() << "a device is present: pinning succeeds";
  test::expect_error([] { HostBuffer b(8192, 4096, &cuda_host_pinner()); }, ErrorKind::Resource,
                     {"pinning 8192 B of host memory failed: "});
  if (!cuda_ops::built()) {
    test::expect_error([] { HostBuffer b(8192, 4096, &cuda_host_pinner()); }, ErrorKind::Resource,
                       {"pinning 8192 B of host memory failed: built without CUDA"});
  }
}

TEST(PinnedHostBuffer, PinnedOnAGpuAndUnpinnedOtherwise) {
  WSBENCH_REQUIRE_GPU();
  HostBuffer pageable(1 << 20, 4096);
  EXPECT_FALSE(pageable.pinned());
  EXPECT_FALSE(is_pinned(pageable.data()));
  {
    HostBuffer pinned(1 << 20, 4096, &cuda_host_pinner());
    EXPECT_TRUE(pinned.pinned());
    EXPECT_TRUE(is_pinned(pinned.data()));
    EXPECT_TRUE(is_pinned(pinned.data() + (1 << 20) - 1));  // the whole range, not just the base
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pinned.data()) % 4096, 0u);
    EXPECT_EQ(pinned.size(), 1u << 20);
    EXPECT_EQ(std::count(pinned.data(), pinned.data() + (1 << 20), 0), 1 << 20);  // zero-initialised
  }
  // A rank image made with the pinner is pinned for its life.
  RankLayout layout;
  RuntimeStorageSpec spec;
  spec.name = "w";
  spec.dtype = DType::BF16;
  spec.shape = {3, 1000};
  layout.storages.push_back(spec);
  RankImage image(layout, &cuda_host_pinner());
  EXPECT_TRUE(image.pinned());
  EXPECT_TRUE(is_pinned(image.storage(0).data()));
  EXPECT_EQ(image.bytes(), 8192u);  // 6000 B rounded up to the 4 KiB image alignment
}

TEST(H2dFloors, DefaultChunkSizes) {
  EXPECT_EQ(default_h2d_chunk_sizes(), (std::vector<uint64_t>{16ull << 20, 64ull << 20, 256ull << 20, 1ull << 30}));
}

TEST(H2dFloors, BadArgumentsRefused) {
  if (!cuda_ops::built()) GTEST_SKIP() << "the stand-in measures nothing";
  test::expect_error([] { measure_h2d_floors({1 << 20, 0}, 1 << 20, 2, 1); }, ErrorKind::Mismatch,
                     {"measure_h2d_floors: total_bytes (1048576), streams (2), repeats (1) and every chunk size must "
                      "be > 0"});
  test::expect_error([] { measure_h2d_floors({1 << 20}, 0, 2, 1); }, ErrorKind::Mismatch, {"total_bytes (0)"});
  test::expect_error([] { measure_h2d_floors({1 << 20}, 1 << 20, 0, 1); }, ErrorKind::Mismatch, {"streams (0)"});
  test::expect_error([] { measure_h2d_floors({1 << 20}, 1 << 20, 1, 0); }, ErrorKind::Mismatch, {"repeats (0)"});
}

TEST(H2dFloors, EmptyWithoutADevice) {
  if (test::have_gpu()) GTEST_SKIP() << "a device is present";
  EXPECT_TRUE(measure_h2d_floors(default_h2d_chunk_sizes(), 1 << 20, 2, 1).empty());
}

TEST(H2dFloors, OneEntryPerDeviceAndChunk) {
  WSBENCH_REQUIRE_GPU();
  const uint64_t total = 256ull << 20;
  // 512 MiB exceeds the total: it is clamped to one piece of the whole buffer.
  const std::vector<uint64_t> chunks = {16ull << 20, 64ull << 20, 512ull << 20};
  const auto floors = measure_h2d_floors(chunks, total, 2, 2);
  const int devices = cuda_ops::visible_devices();
  ASSERT_EQ(floors.size(), static_cast<size_t>(devices) * chunks.size());
  for (int d = 0; d < devices; ++d) {
    for (size_t c = 0; c < chunks.size(); ++c) {
      const H2dFloor& f = floors[static_cast<size_t>(d) * chunks.size() + c];
      EXPECT_EQ(f.device, d);
      EXPECT_EQ(f.chunk_bytes, std::min(chunks[c], total));
      EXPECT_EQ(f.streams, 2);
      EXPECT_EQ(f.bytes, total);
      EXPECT_GT(f.gbps, 1.0) << fmt::format("device {} chunk {}", d, f.chunk_bytes);
      EXPECT_LT(f.gbps, 1000.0) << "faster than any PCIe/NVLink-C2C host link: the timing is wrong";
    }
  }
}

}  // namespace
}  // namespace wsb
