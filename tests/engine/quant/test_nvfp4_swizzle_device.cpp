// NVFP4 128x4 block-scale swizzle on the device (engine/quant/nvfp4_swizzle_device.hpp). Everywhere: the inverse
// map the kernel uses (nvfp4_swizzle_source) reproduces the host transform nvfp4_scale_swizzle_transform byte for
// byte, and a staging cannot be made without a device. On a GPU: the kernel alone and the staged path (pinned and
// pageable sources, budgets that force one, two or all experts per chunk, odd last chunks) write exactly the host
// transform's bytes into a dirty destination, padding included; a budget below two experts is refused with the
// bytes it needs.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/pinned.hpp"
#include "engine/quant/device_staging.hpp"
#include "engine/quant/device_util.hpp"
#include "engine/quant/nvfp4_swizzle_device.hpp"
#include "engine/quant/nvfp4_swizzle_math.hpp"
#include "models/transform/nvfp4.hpp"
#include "modes/sync/host_buffer.hpp"
#include "tests/engine/quant/linear_cases.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

/// Gathered scales [E, M, K16] (random bytes, E4M3 NaN codes included: a swizzle moves bytes, it never reads them)
/// and the host transform's runtime bytes.
struct SwizzleCase {
  int64_t e, m, k16;
  std::vector<uint8_t> gathered;
  std::vector<uint8_t> runtime;  ///< nvfp4_scale_swizzle_transform(gathered)

  SwizzleCase(int64_t experts, int64_t rows, int64_t blocks, uint32_t seed) : e(experts), m(rows), k16(blocks) {
    gathered = test::random_bytes(static_cast<size_t>(e * m * k16), seed);
    runtime = test::run_transform(kNvfp4ScaleSwizzle, DType::F8_E4M3, {e, m, k16}, gathered, runtime_shape());
  }
  Shape runtime_shape() const { return nvfp4_scale_swizzled_shape({e, m, k16}); }
  uint64_t runtime_bytes() const { return runtime.size(); }
  uint64_t per_expert() const { return nvfp4_swizzle_expert_bytes(m, k16); }
};

// ---- everywhere ----

TEST(Nvfp4SwizzleMath, InverseMapEqualsTheHostTransform) {
  for (const auto& [e, m, k16] : std::vector<std::array<int64_t, 3>>{{1, 128, 4}, {3, 200, 7}, {2, 1, 1}, {1, 257, 13}}) {
    SwizzleCase c(e, m, k16, static_cast<uint32_t>(m * 31 + k16));
    const Shape r = c.runtime_shape();
    std::vector<uint8_t> out(c.runtime_bytes(), 0xEE);
    for (int64_t o = 0; o < static_cast<int64_t>(out.size()); ++o) {
      const int64_t src = quant::nvfp4_swizzle_source(r[1], r[2], m, k16, o);
      out[static_cast<size_t>(o)] = src < 0 ? 0 : c.gathered[static_cast<size_t>(src)];
    }
    EXPECT_EQ(test::fnv1a(out), test::fnv1a(c.runtime)) << e << "x" << m << "x" << k16;
    ASSERT_EQ(out, c.runtime) << e << "x" << m << "x" << k16;
  }
}

TEST(Nvfp4SwizzleMath, BudgetArithmetic) {
  EXPECT_EQ(nvfp4_swizzle_expert_bytes(200, 7), 1400u);
  EXPECT_EQ(nvfp4_swizzle_min_budget(200, 7), 2800u);
  EXPECT_EQ(nvfp4_swizzle_expert_bytes(0, 7), 0u);
  EXPECT_EQ(nvfp4_swizzle_expert_bytes(-1, 7), 0u);
}

TEST(DeviceStagingNoDevice, RefusedWithoutADevice) {
  if (test::have_gpu()) GTEST_SKIP() << "a device is present";
  if (!cuda_ops::built()) {
    test::expect_error([] { DeviceStaging s(1 << 20); }, ErrorKind::Resource, {"DeviceStaging: built without CUDA"});
  } else {
    test::expect_error([] { DeviceStaging s(1 << 20); }, ErrorKind::Resource,
                       {"no CUDA device: DeviceStaging needs one ("});
  }
}

// ---- GPU ----

class Nvfp4SwizzleDevice : public ::testing::Test {
 protected:
  void SetUp() override { WSBENCH_REQUIRE_GPU(); }

  /// Runs the staged swizzle from `source` (a copy of c.gathered) into a destination pre-filled with 0xCD.
  std::vector<uint8_t> staged(const SwizzleCase& c, const uint8_t* source, DeviceStaging& staging) {
    DeviceBuffer out(c.runtime_bytes());
    out.fill(0xCD);
    nvfp4_scale_swizzle_device(source, c.e, c.m, c.k16, out.data(), staging, nullptr);
    std::vector<uint8_t> got(c.runtime_bytes());
    out.download(got.data(), got.size());
    return got;
  }
};

TEST_F(Nvfp4SwizzleDevice, KernelAloneEqualsHostTransformIntoDirtyDestination) {
  for (const auto& [e, m, k16] : std::vector<std::array<int64_t, 3>>{{5, 200, 7}, {1, 128, 4}, {2, 1, 1}, {3, 1000, 450}}) {
    SwizzleCase c(e, m, k16, static_cast<uint32_t>(e + m + k16));
    DeviceBuffer in(c.gathered.size()), out(c.runtime_bytes());
    in.upload(c.gathered.data(), c.gathered.size());
    out.fill(0xCD);
    nvfp4_scale_swizzle_launch(in.data(), e, m, k16, out.data(), nullptr);
    std::vector<uint8_t> got(c.runtime_bytes());
    out.download(got.data(), got.size());
    EXPECT_EQ(test::fnv1a(got), test::fnv1a(c.runtime)) << e << "x" << m << "x" << k16;
    ASSERT_EQ(got, c.runtime) << e << "x" << m << "x" << k16;
  }
}

TEST_F(Nvfp4SwizzleDevice, StagedPinnedSourceAcrossBudgets) {
  const SwizzleCase c(7, 200, 7, 3);  // 1400 B per expert
  HostBuffer pinned(c.gathered.size(), 4096, &cuda_host_pinner());
  std::memcpy(pinned.data(), c.gathered.data(), c.gathered.size());
  // 1, 2 (last chunk 1), 3 (last chunk 1) and all 7 experts per chunk.
  for (uint64_t budget : {2 * c.per_expert(), 5 * c.per_expert(), 6 * c.per_expert() + 1, 64 * c.per_expert()}) {
    DeviceStaging staging(budget);
    EXPECT_EQ(staging.budget_bytes(), budget);
    EXPECT_EQ(staging.half_bytes(), budget / 2);
    EXPECT_EQ(staging.device(), 0);
    const auto got = staged(c, pinned.data(), staging);
    EXPECT_EQ(test::fnv1a(got), test::fnv1a(c.runtime)) << "budget " << budget;
    ASSERT_EQ(got, c.runtime) << "budget " << budget;
    EXPECT_FALSE(staging.has_bounce_buffer()) << "a pinned source is copied directly";
  }
}

TEST_F(Nvfp4SwizzleDevice, StagedPageableSourceGoesThroughTheBounceBuffer) {
  const SwizzleCase c(9, 257, 13, 4);  // Mp 384, Kp 16: padding in both dims
  const std::vector<uint8_t> pageable = c.gathered;
  DeviceStaging staging(2 * c.per_expert() + 7);  // one expert per chunk, nine chunks alternating halves
  const auto got = staged(c, pageable.data(), staging);
  EXPECT_TRUE(staging.has_bounce_buffer());
  ASSERT_EQ(got, c.runtime);
  // The staging is reusable, and a second run into another dirty destination gives the same bytes.
  const SwizzleCase other(4, 257, 13, 5);
  ASSERT_EQ(staged(other, other.gathered.data(), staging), other.runtime);
}

TEST_F(Nvfp4SwizzleDevice, TooSmallBudgetRefusedWithTheBytesNeeded) {
  const SwizzleCase c(2, 200, 7, 6);
  DeviceStaging staging(2 * c.per_expert() - 2);  // each half holds 1399 B, one expert needs 1400
  DeviceBuffer out(c.runtime_bytes());
  out.fill(0xCD);
  test::expect_error(
      [&] { nvfp4_scale_swizzle_device(c.gathered.data(), c.e, c.m, c.k16, out.data(), staging, nullptr); },
      ErrorKind::Resource,
      {"nvfp4 scale swizzle: staging budget 2798 bytes is too small: one expert's gathered scales [200, 7] need "
       "1400 bytes per half, a budget of at least 2800 bytes"});
  std::vector<uint8_t> got(c.runtime_bytes());
  out.download(got.data(), got.size());
  EXPECT_EQ(got, std::vector<uint8_t>(got.size(), 0xCD)) << "refused before writing";
}

TEST_F(Nvfp4SwizzleDevice, BadArgumentsRefused) {
  DeviceStaging staging(1 << 20);
  uint8_t byte = 0;
  test::expect_error([&] { nvfp4_scale_swizzle_device(&byte, -1, 4, 4, &byte, staging, nullptr); },
                     ErrorKind::Mismatch, {"negative dims in gathered [-1, 4, 4]"});
  test::expect_error([&] { nvfp4_scale_swizzle_device(nullptr, 1, 4, 4, &byte, staging, nullptr); },
                     ErrorKind::Mismatch, {"null source or runtime pointer for gathered [1, 4, 4]"});
  test::expect_error([] { DeviceStaging s(0); }, ErrorKind::Mismatch, {"DeviceStaging: budget of 0 bytes"});
  const int devices = cuda_ops::visible_devices();
  test::expect_error([&] { DeviceStaging s(64, devices); }, ErrorKind::Mismatch,
                     {"DeviceStaging: device " + std::to_string(devices) + " outside the " +
                      std::to_string(devices) + " visible devices"});
  nvfp4_scale_swizzle_device(nullptr, 0, 4, 4, nullptr, staging, nullptr);  // nothing to move: no pointer needed
}

}  // namespace
}  // namespace wsb
