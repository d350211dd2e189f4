// CuptiTracer on a GPU: around a commit-like sequence of chunked H2D writes from a pinned source, the summary
// reports exactly the bytes and records that were copied, and nothing of the zero fill or of later reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "engine/cuda/cupti_tracer.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/cuda/pinned.hpp"
#include "modes/sync/host_buffer.hpp"
#include "tests/support/gpu_support.hpp"

namespace wsb {
namespace {

TEST(CuptiTracerGpu, CountsExactlyTheH2dBytesCopied) {
  WSBENCH_REQUIRE_GPU();
  if (const char* env = std::getenv("WSBENCH_CUPTI"); env != nullptr && std::string(env) == "0")
    GTEST_SKIP() << "WSBENCH_CUPTI=0";
  if (const std::string why = CuptiTracer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;

  const std::vector<int64_t> sizes = {1 << 20, 12345, (3 << 20) + 7};
  const uint64_t chunk = 256 << 10;
  RankLayout layout;
  uint64_t total = 0, chunks = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    RuntimeStorageSpec spec;
    spec.name = "s" + std::to_string(i);
    spec.dtype = DType::U8;
    spec.shape = {sizes[i]};
    layout.storages.push_back(spec);
    total += static_cast<uint64_t>(sizes[i]);
    chunks += (static_cast<uint64_t>(sizes[i]) + chunk - 1) / chunk;
  }
  ASSERT_EQ(chunks, 4u + 1u + 13u);
  auto storages = make_device_storages({layout}, {chunk, 2, 0});  // zero fill happens before the trace
  HostBuffer source(static_cast<size_t>((3 << 20) + 7), 4096, &cuda_host_pinner());
  const auto data = test::random_bytes(source.size(), 11);
  std::memcpy(source.data(), data.data(), data.size());

  CuptiTracer tracer;
  tracer.start();
  for (size_t i = 0; i < sizes.size(); ++i)
    storages->write(0, i, 0, std::span<const uint8_t>(source.data(), static_cast<size_t>(sizes[i])));
  storages->synchronize();
  const CuptiSummary s = tracer.stop();

  ASSERT_TRUE(s.enabled) << s.note;
  EXPECT_EQ(s.h2d_bytes, total);
  EXPECT_EQ(s.h2d_records, chunks);
  EXPECT_EQ(s.memcpy_records, chunks);  // no D2H or D2D inside the trace
  EXPECT_EQ(s.dropped_records, 0u);
  EXPECT_EQ(s.note, "");
  EXPECT_GT(s.copy_busy_seconds, 0.0);
  EXPECT_GE(s.first_to_last_seconds, s.copy_busy_seconds);
  EXPECT_NEAR(s.achieved_gbps, static_cast<double>(total) / s.copy_busy_seconds / 1e9, 1e-9 * s.achieved_gbps);
  EXPECT_EQ(s.kernel_records, 0u);

  // A second session after the first sees only its own copies.
  std::vector<uint8_t> back(static_cast<size_t>(sizes[1]));
  tracer.start();
  storages->write(0, 1, 0, std::span<const uint8_t>(source.data(), back.size()));
  storages->read(0, 1, back);  // one D2H record
  const CuptiSummary again = tracer.stop();
  ASSERT_TRUE(again.enabled) << again.note;
  EXPECT_EQ(again.h2d_bytes, static_cast<uint64_t>(sizes[1]));
  EXPECT_EQ(again.h2d_records, 1u);
  EXPECT_GE(again.memcpy_records, 2u);  // the D2H into pageable memory may be reported in pieces
  EXPECT_EQ(back, std::vector<uint8_t>(data.begin(), data.begin() + sizes[1]));
}

}  // namespace
}  // namespace wsb
