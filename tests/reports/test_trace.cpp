// Chrome/Perfetto trace JSON of one trial.
#include "reports/trace.hpp"

#include <gtest/gtest.h>

#include "results_builders.hpp"

namespace wsb {
namespace {

using nlohmann::json;

std::vector<json> complete(const json& trace, int tid) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == tid) out.push_back(e);
  }
  return out;
}

Trial timed_trial() {
  Trial t;
  t.index = 1;
  t.times_s = {{"native_load", 0.5}, {"prepare", 2.0}, {"commit", 0.25}, {"pause", 0.125}, {"envelope", 2.5}};
  t.phases = {Phase{"load.read", 0.25, 100, "disk_read", json::object()},
              Phase{"prepare.read", 1.5, 1000, "disk_read", json::object()},
              Phase{"prepare.apply", 0.25, 0, "", json::object()},
              Phase{"commit.copy", 0.125, 1000, "host_memcpy", json::object()}};
  return t;
}

TEST(ReportsTrace, WithoutTimelineStagesFollowEachOtherAndPauseEndsWithCommit) {
  Cell c = testing::cell("m", "cpu", "native", 2, "h1", {});
  const json trace = trial_trace(c, timed_trial());
  const auto trial = complete(trace, 1);
  ASSERT_EQ(trial.size(), 3u);
  EXPECT_EQ(trial[0]["name"], "native_load");
  EXPECT_EQ(trial[0]["ts"], 0.0);
  EXPECT_EQ(trial[0]["dur"], 500000.0);
  EXPECT_EQ(trial[1]["name"], "prepare");
  EXPECT_EQ(trial[1]["ts"], 500000.0);
  EXPECT_EQ(trial[1]["dur"], 2000000.0);
  EXPECT_EQ(trial[2]["name"], "commit");
  EXPECT_EQ(trial[2]["ts"], 2500000.0);
  EXPECT_EQ(trial[2]["dur"], 250000.0);
  const auto pause = complete(trace, 2);
  ASSERT_EQ(pause.size(), 1u);
  EXPECT_EQ(pause[0]["ts"], 2625000.0);
  EXPECT_EQ(pause[0]["dur"], 125000.0);
  const auto phases = complete(trace, 3);
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_EQ(phases[0]["ts"], 0.0);              // load.read in native_load
  EXPECT_EQ(phases[1]["ts"], 500000.0);         // prepare.read at prepare start
  EXPECT_EQ(phases[2]["ts"], 2000000.0);        // prepare.apply after prepare.read
  EXPECT_EQ(phases[3]["ts"], 2500000.0);        // commit.copy at commit start
  EXPECT_EQ(phases[1]["args"], (json{{"bytes", 1000}, {"floor", "disk_read"}}));
  EXPECT_EQ(trace["otherData"]["cell"], c.id);
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_TRUE(complete(trace, 4).empty());
}

TEST(ReportsTrace, TimelineStartsAndDecodeSteps) {
  Cell c = testing::cell("m", "cpu", "native", 2, "h1", {});
  Trial t = timed_trial();
  t.extra["timeline"] = json::parse(R"({"native_load": {"start_s": 0, "end_s": 0.5},
      "prepare": {"start_s": 0.75, "end_s": 2.75}, "commit": {"start_s": 3.0, "end_s": 3.25},
      "pause": {"start_s": 3.125, "end_s": 3.25, "estimated": true},
      "decode_steps_s": [1.0, 1.01, 1.02, 3.3]})");
  const json trace = trial_trace(c, t);
  const auto trial = complete(trace, 1);
  EXPECT_EQ(trial[1]["ts"], 750000.0);
  EXPECT_EQ(trial[2]["ts"], 3000000.0);
  EXPECT_EQ(complete(trace, 2)[0]["ts"], 3125000.0);
  const auto steps = complete(trace, 4);
  ASSERT_EQ(steps.size(), 4u);
  // Median gap 0.01 s: every step lasts at most that and ends at its time.
  EXPECT_NEAR(steps[0]["ts"].get<double>(), 990000.0, 1e-6);
  EXPECT_NEAR(steps[0]["dur"].get<double>(), 10000.0, 1e-6);
  EXPECT_NEAR(steps[3]["ts"].get<double>() + steps[3]["dur"].get<double>(), 3300000.0, 1e-6);
  EXPECT_NEAR(steps[3]["dur"].get<double>(), 10000.0, 1e-6);
}

TEST(ReportsTrace, UnknownCellOrTrialIsNamed) {
  const Results r = testing::two_cell_results();
  const Cell* cell = nullptr;
  EXPECT_EQ(find_trial(r, "f.json", "llama-tiny-bf16/cpu/gvisor/tp2", 1, &cell).index, 1);
  EXPECT_EQ(cell->mode_label(), "cpu");
  try {
    find_trial(r, "f.json", "llama-tiny-bf16/cpu/gvisor/tp2", 7, &cell);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "f.json: cell 'llama-tiny-bf16/cpu/gvisor/tp2' has no trial 7 (trials: 0, 1)");
  }
  try {
    find_trial(r, "f.json", "nope", 0, &cell);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "f.json: no cell 'nope' (cells: llama-tiny-bf16/disk/native/tp2, llama-tiny-bf16/cpu/gvisor/tp2)");
  }
}

}  // namespace
}  // namespace wsb
