// GPU discovery: skips cleanly on machines without a CUDA device (CI), checks real facts where one exists.
#include <gtest/gtest.h>

#include "engine/device_info.hpp"

namespace wsb {
namespace {

TEST(DeviceInfo, ReportsDevicesOrSkips) {
  const auto devices = cuda_devices();
  if (devices.empty()) GTEST_SKIP() << "no CUDA device present";
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].index, static_cast<int>(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].memory_bytes, 1ull << 30);
    EXPECT_GE(devices[i].compute_major, 7);
  }
  EXPECT_FALSE(cuda_driver_version().empty());
  EXPECT_FALSE(cuda_runtime_version().empty());
}

}  // namespace
}  // namespace wsb
