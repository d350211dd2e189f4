// The prepare's worker pool: every piece of a job runs exactly once, jobs submitted from many threads at once all
// complete (a submitter works on its own job, so nothing waits on a busy pool), the first failure is rethrown and
// the pieces not yet begun are skipped; parallel copies equal memcpy; piece sizes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "modes/sync/work_pool.hpp"

namespace wsb {
namespace {

TEST(WorkPool, EveryPieceRunsExactlyOnce) {
  WorkPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  std::vector<std::atomic<int>> runs(1000);
  pool.run(runs.size(), [&](size_t i) { ++runs[i]; });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  pool.run(0, [](size_t) { FAIL() << "no piece to run"; });
}

TEST(WorkPool, JobsFromManyThreadsAtOnceAllComplete) {
  WorkPool pool(3);
  std::vector<std::thread> submitters;
  std::vector<uint64_t> sums(8, 0);
  for (size_t t = 0; t < sums.size(); ++t) {
    submitters.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::vector<uint64_t> parts(37, 0);
        pool.run(parts.size(), [&](size_t i) { parts[i] = i + t; });
        sums[t] += std::accumulate(parts.begin(), parts.end(), uint64_t{0});
      }
    });
  }
  for (auto& s : submitters) s.join();
  for (size_t t = 0; t < sums.size(); ++t) EXPECT_EQ(sums[t], 50 * (37 * 36 / 2 + 37 * t)) << t;
}

TEST(WorkPool, APieceThatThrowsFailsTheJobAndSkipsWhatHasNotBegun) {
  WorkPool pool(2);
  std::atomic<int> ran{0};
  std::atomic<bool> began{false};
  try {
    pool.run(10000, [&](size_t i) {
      ++ran;
      if (i == 0) {
        began = true;
        throw std::runtime_error("piece 0 failed");
      }
      // The other pieces wait for the failing one to begin: on a loaded host its thread may otherwise start only
      // after the other worker has taken every piece.
      while (!began) std::this_thread::yield();
      std::this_thread::yield();
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "piece 0 failed");
  }
  EXPECT_LT(ran.load(), 10000);
  // The pool is usable afterwards.
  std::atomic<int> after{0};
  pool.run(5, [&](size_t) { ++after; });
  EXPECT_EQ(after.load(), 5);
}

TEST(WorkPool, OneThreadRunsEveryPieceOnTheSubmitter) {
  WorkPool pool(1);
  EXPECT_EQ(pool.threads(), 1);
  const auto self = std::this_thread::get_id();
  int ran = 0;
  pool.run(7, [&](size_t) {
    EXPECT_EQ(std::this_thread::get_id(), self);
    ++ran;
  });
  EXPECT_EQ(ran, 7);
}

TEST(WorkPool, PieceBytes) {
  EXPECT_EQ(piece_bytes(uint64_t{1} << 30, 16), uint64_t{16} << 20);  // 4 pieces per thread
  EXPECT_EQ(piece_bytes(uint64_t{3} << 20, 16), uint64_t{1} << 20);   // never below the minimum
  EXPECT_EQ(piece_bytes(1000, 4, 64), 64u);
  EXPECT_EQ(piece_bytes(1001, 1, 1), 251u);  // ceil(1001 / 4)
  EXPECT_EQ(piece_bytes(0, 4, 0), 1u);
}

TEST(WorkPool, StreamingCopyEqualsMemcpyAtEveryAlignmentAndSize) {
  // Below, at and above the size where the stores start to bypass the caches, every misalignment of either side.
  const size_t sizes[] = {0, 1, 4095, (size_t{256} << 10) - 1, size_t{256} << 10, (size_t{256} << 10) + 77};
  std::vector<uint8_t> src((size_t{256} << 10) + 200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
  for (size_t bytes : sizes) {
    for (size_t d = 0; d < 17; d += 3) {
      for (size_t s = 0; s < 17; s += 5) {
        std::vector<uint8_t> dst(bytes + 40, 0xEE);
        copy_streaming(dst.data() + d, src.data() + s, bytes);
        std::vector<uint8_t> want(bytes + 40, 0xEE);
        std::memcpy(want.data() + d, src.data() + s, bytes);
        ASSERT_EQ(dst, want) << "bytes " << bytes << " dst +" << d << " src +" << s;
      }
    }
  }
}

TEST(WorkPool, ParallelCopyEqualsMemcpy) {
  WorkPool pool(3);
  std::vector<uint8_t> src((uint64_t{5} << 20) + 13);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<uint8_t> dst(src.size(), 0xEE);
  parallel_copy(&pool, dst, src);
  EXPECT_EQ(dst, src);
  std::vector<uint8_t> alone(src.size(), 0xEE);
  parallel_copy(nullptr, alone, src);
  EXPECT_EQ(alone, src);
}

}  // namespace
}  // namespace wsb
