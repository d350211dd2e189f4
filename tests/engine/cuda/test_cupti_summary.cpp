// CUPTI summary arithmetic and tracer session rules, without a device: interval unions (overlapping, nested,
// touching, empty and reversed intervals), summarize_cupti with incomplete and dropped records (exact values and
// note text), cupti_json's keys, and CuptiTracer's one-session-per-process rule and WSBENCH_CUPTI=0 switch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/cupti_tracer.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

/// Sets (or unsets, for nullopt) an environment variable for one test and restores the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (previous_) {
      ::setenv(name_, previous_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

TEST(UnionSeconds, MergesOverlappingNestedAndTouchingIntervals) {
  // [100,300) + [200,400) + nested [150,250) -> [100,400); [500,600) touches [600,700) -> [500,700);
  // [50,50) is empty and [900,800) reversed: both add nothing. Union = 300 + 200 ns.
  const std::vector<CuptiInterval> intervals = {{600, 700}, {100, 300}, {900, 800}, {200, 400},
                                                {50, 50},   {150, 250}, {500, 600}};
  EXPECT_EQ(union_seconds(intervals), 500.0 / 1e9);
  EXPECT_EQ(union_seconds({}), 0.0);
  EXPECT_EQ(union_seconds({{10, 10}, {20, 5}}), 0.0);
  EXPECT_EQ(union_seconds({{0, 1'000'000'000}}), 1.0);
  // Disjoint: plain sum.
  EXPECT_EQ(union_seconds({{0, 10}, {20, 25}, {40, 41}}), 16.0 / 1e9);
}

TEST(SummarizeCupti, ExactValuesWithIncompleteAndDroppedRecords) {
  CuptiRecords r;
  r.h2d = {{2000, 5000}, {1000, 3000}, {8000, 9000}};  // union 4000 + 1000 ns, first 1000, last 9000
  r.h2d_bytes = 12'000'000;
  r.h2d_records = 5;  // two of them had no timestamps
  r.memcpy_records = 7;
  r.kernels = {{1000, 2000}, {1500, 2500}};
  r.incomplete_records = 2;
  r.dropped_records = 3;
  const CuptiSummary s = summarize_cupti(r);
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.h2d_bytes, 12'000'000u);
  EXPECT_EQ(s.h2d_records, 5u);
  EXPECT_EQ(s.memcpy_records, 7u);
  EXPECT_EQ(s.copy_busy_seconds, 5000.0 / 1e9);
  EXPECT_EQ(s.first_to_last_seconds, 8000.0 / 1e9);
  EXPECT_EQ(s.achieved_gbps, 12'000'000.0 / (5000.0 / 1e9) / 1e9);
  EXPECT_NEAR(s.achieved_gbps, 2400.0, 1e-9);
  EXPECT_EQ(s.kernel_records, 2u);
  EXPECT_EQ(s.kernel_busy_seconds, 1500.0 / 1e9);
  EXPECT_EQ(s.dropped_records, 3u);
  EXPECT_EQ(s.note,
            "2 records without timestamps (work unfinished at stop; their bytes are counted); 3 records dropped by "
            "CUPTI");
}

TEST(SummarizeCupti, EmptyRecordsGiveZerosAndNoNote) {
  const CuptiSummary s = summarize_cupti(CuptiRecords{});
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.note, "");
  EXPECT_EQ(s.h2d_bytes, 0u);
  EXPECT_EQ(s.copy_busy_seconds, 0.0);
  EXPECT_EQ(s.first_to_last_seconds, 0.0);
  EXPECT_EQ(s.achieved_gbps, 0.0);
  EXPECT_EQ(s.kernel_records, 0u);
  EXPECT_EQ(s.kernel_busy_seconds, 0.0);
}

TEST(SummarizeCupti, OnlyIncompleteCopiesCountBytesButNoRate) {
  CuptiRecords r;
  r.h2d_bytes = 4096;
  r.h2d_records = 1;
  r.memcpy_records = 1;
  r.incomplete_records = 1;
  const CuptiSummary s = summarize_cupti(r);
  EXPECT_EQ(s.h2d_bytes, 4096u);
  EXPECT_EQ(s.copy_busy_seconds, 0.0);
  EXPECT_EQ(s.first_to_last_seconds, 0.0);
  EXPECT_EQ(s.achieved_gbps, 0.0);  // never a division by zero
  EXPECT_EQ(s.note, "1 records without timestamps (work unfinished at stop; their bytes are counted)");
}

TEST(SummarizeCupti, DroppedOnlyNote) {
  CuptiRecords r;
  r.dropped_records = 9;
  EXPECT_EQ(summarize_cupti(r).note, "9 records dropped by CUPTI");
}

TEST(CuptiJson, CarriesEveryField) {
  CuptiRecords r;
  r.h2d = {{0, 2000}};
  r.h2d_bytes = 8000;
  r.h2d_records = 1;
  r.memcpy_records = 3;
  r.kernels = {{0, 500}};
  const nlohmann::json j = cupti_json(summarize_cupti(r));
  EXPECT_EQ(j.size(), 11u);
  EXPECT_EQ(j.at("enabled"), true);
  EXPECT_EQ(j.at("note"), "");
  EXPECT_EQ(j.at("h2d_bytes"), 8000u);
  EXPECT_EQ(j.at("memcpy_records"), 3u);
  EXPECT_EQ(j.at("h2d_records"), 1u);
  EXPECT_EQ(j.at("copy_busy_seconds").get<double>(), 2000.0 / 1e9);
  EXPECT_EQ(j.at("first_to_last_seconds").get<double>(), 2000.0 / 1e9);
  EXPECT_EQ(j.at("achieved_gbps").get<double>(), 8000.0 / (2000.0 / 1e9) / 1e9);
  EXPECT_EQ(j.at("kernel_records"), 1u);
  EXPECT_EQ(j.at("kernel_busy_seconds").get<double>(), 500.0 / 1e9);
  EXPECT_EQ(j.at("dropped_records"), 0u);
}

TEST(CuptiTracer, DisabledByEnvironment) {
  ScopedEnv env("WSBENCH_CUPTI", "0");
  EXPECT_EQ(CuptiTracer::unavailable_reason(), "disabled by WSBENCH_CUPTI=0");
  CuptiTracer tracer;
  EXPECT_FALSE(tracer.active());
  tracer.start();
  EXPECT_TRUE(tracer.active());
  const CuptiSummary s = tracer.stop();
  EXPECT_FALSE(tracer.active());
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.note, "disabled by WSBENCH_CUPTI=0");
  EXPECT_EQ(s.h2d_bytes, 0u);
}

TEST(CuptiTracer, ReasonWithoutTheSwitchNamesTheMachineFact) {
  ScopedEnv env("WSBENCH_CUPTI", std::nullopt);
  const std::string reason = CuptiTracer::unavailable_reason();
  if (!cuda_ops::built()) {
    EXPECT_EQ(reason, "built without CUDA");
  } else if (cuda_ops::visible_devices() == 0) {
    EXPECT_EQ(reason, "no CUDA device");
  } else {
    // "" when libcupti loads, else the loader's account of every candidate it tried.
    EXPECT_TRUE(reason.empty() || reason.rfind("libcupti not loadable (tried ", 0) == 0 ||
                reason.rfind("libcupti lacks ", 0) == 0)
        << reason;
  }
  ScopedEnv other("WSBENCH_CUPTI", "1");  // only "0" disables
  EXPECT_EQ(CuptiTracer::unavailable_reason(), reason);
}

TEST(CuptiTracer, OneSessionPerProcess) {
  ScopedEnv env("WSBENCH_CUPTI", "0");
  CuptiTracer first;
  first.start();
  CuptiTracer second;
  test::expect_error([&] { second.start(); }, ErrorKind::State, {"another tracer is already active"});
  EXPECT_FALSE(second.active());
  test::expect_error([&] { first.start(); }, ErrorKind::State, {"another tracer is already active"});
  first.stop();
  second.start();  // the session was released by stop()
  EXPECT_TRUE(second.active());
  second.stop();
}

TEST(CuptiTracer, StopWithoutStartAndReleaseOnDestruction) {
  ScopedEnv env("WSBENCH_CUPTI", "0");
  CuptiTracer idle;
  test::expect_error([&] { idle.stop(); }, ErrorKind::State, {"stop() without start()"});
  {
    CuptiTracer dropped;
    dropped.start();
  }  // destroyed while active: the process-wide session must be free again
  CuptiTracer next;
  next.start();
  EXPECT_TRUE(next.active());
  test::expect_error([&] { next.stop(); next.stop(); }, ErrorKind::State, {"stop() without start()"});
}

}  // namespace
}  // namespace wsb
