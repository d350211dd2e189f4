// The memory sampler: parsing of statm / meminfo / cgroup files, and peaks that cover an allocation it observed.
#include "harness/memory_sampler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

namespace wsb {
namespace {

using namespace std::chrono_literals;

TEST(HarnessMemorySampler, ParsesStatmAndMeminfo) {
  EXPECT_EQ(statm_rss_bytes("12345 678 90 1 0 2 0\n", 4096), 678u * 4096u);
  EXPECT_EQ(statm_rss_bytes("garbage", 4096), std::nullopt);
  const std::string meminfo =
      "MemTotal:       16000000 kB\nMemFree:          100 kB\nMemAvailable:    8000000 kB\nBuffers: 5 kB\n"
      "Cached:          2500000 kB\nSwapCached:  7 kB\n";
  EXPECT_EQ(meminfo_bytes(meminfo, "MemAvailable"), 8000000ull * 1024);
  EXPECT_EQ(meminfo_bytes(meminfo, "Cached"), 2500000ull * 1024);  // not SwapCached
  EXPECT_EQ(meminfo_bytes(meminfo, "Missing"), std::nullopt);
}

TEST(HarnessMemorySampler, FindsTheCgroupMemoryDirectory) {
  bool v1 = true;
  EXPECT_EQ(cgroup_memory_dir("0::/user.slice/app.scope\n", "/sys/fs/cgroup", &v1),
            "/sys/fs/cgroup/user.slice/app.scope");
  EXPECT_FALSE(v1);
  EXPECT_EQ(cgroup_memory_dir("12:cpu,cpuacct:/a\n11:memory:/docker/abc\n1:name=systemd:/x\n", "/sys/fs/cgroup", &v1),
            "/sys/fs/cgroup/memory/docker/abc");
  EXPECT_TRUE(v1);
  EXPECT_EQ(cgroup_memory_dir("3:cpu:/a\n", "/sys/fs/cgroup", &v1), "");
}

TEST(HarnessMemorySampler, PeaksCoverAnAllocationSeenWhileSampling) {
  constexpr size_t kBytes = 96u << 20;
  MemorySampler sampler(2ms);
  sampler.start();
  const size_t first = sampler.samples();
  EXPECT_EQ(first, 1u);  // start() samples synchronously
  MemoryPeaks before_alloc;
  {
    // The baseline RSS before the allocation, from a separate window.
    MemorySampler base(2ms);
    base.start();
    before_alloc = base.stop();
  }
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);  // touch every page
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  const size_t seen = sampler.samples();
  while (sampler.samples() < seen + 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  block.reset();  // freed before stop: only a sample taken while it was resident can show it
  const MemoryPeaks peaks = sampler.stop();
  EXPECT_GE(peaks.samples, seen + 3);
  EXPECT_GE(peaks.rss_peak_bytes, before_alloc.rss_peak_bytes + kBytes - (4u << 20));
  if (peaks.cgroup_current_peak_bytes) {
    EXPECT_GE(*peaks.cgroup_current_peak_bytes, kBytes);
  }
  ASSERT_TRUE(peaks.mem_available_min_bytes.has_value());
  EXPECT_GT(*peaks.mem_available_min_bytes, 0u);
  EXPECT_TRUE(peaks.device_used_peak_bytes.empty());  // devices not requested
  EXPECT_GT(peaks.seconds, 0.0);
  const nlohmann::json j = memory_peaks_json(peaks, sampler.period());
  EXPECT_EQ(j["samples"], peaks.samples);
  EXPECT_EQ(j["period_ms"], 2);
  EXPECT_EQ(j["rss_peak_bytes"], peaks.rss_peak_bytes);
  // A second window starts from zero.
  sampler.start();
  EXPECT_EQ(sampler.samples(), 1u);
  EXPECT_THROW(sampler.start(), std::logic_error);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory resident in its quarantine: the freed allocation still counts.
  sampler.stop();
#else
  EXPECT_LT(sampler.stop().rss_peak_bytes, peaks.rss_peak_bytes);
#endif
}

}  // namespace
}  // namespace wsb
