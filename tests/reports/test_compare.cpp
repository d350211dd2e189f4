// Baseline vs candidate comparison.
#include "reports/compare.hpp"

#include <gtest/gtest.h>

#include "results_builders.hpp"

namespace wsb {
namespace {

Results baseline() {
  return testing::results_for("a", {testing::cell("m", "cpu", "native", 2, "a", {{1.0, 10.0}, {1.0, 10.0}}),
                                    testing::cell("m", "disk", "native", 2, "a", {{20.0, 80.0}})});
}

// The cpu cell's pause is 10% slower; its loop and the disk cell are unchanged.
Results candidate() {
  Results r = baseline();
  for (Trial& t : r.cells[0].trials) t.times_s["pause"] = 1.1;
  return r;
}

TEST(ReportsCompare, TenPercentSlowerPauseRegressesAtFivePercent) {
  const Comparison c = compare_results(baseline(), candidate(), 0.05);
  EXPECT_TRUE(c.regressed);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_TRUE(c.rows[0].regression);
  EXPECT_NEAR(*c.rows[0].pause.ratio, 1.1, 1e-12);
  EXPECT_DOUBLE_EQ(*c.rows[0].loop.ratio, 1.0);
  EXPECT_EQ(c.rows[0].verdict, "REGRESSION: pause 1.10x > 1.05x");
  EXPECT_FALSE(c.rows[1].regression);
  EXPECT_EQ(c.rows[1].verdict, "ok");
}

TEST(ReportsCompare, TenPercentSlowerPauseIsWithinTwentyPercent) {
  const Comparison c = compare_results(baseline(), candidate(), 0.2);
  EXPECT_FALSE(c.regressed);
  EXPECT_FALSE(c.rows[0].regression);
  EXPECT_EQ(c.rows[0].verdict, "ok");
}

TEST(ReportsCompare, CandidateFailureWhereBaselinePassedRegresses) {
  Results cand = baseline();
  cand.cells[1].status = Status::Fail;
  cand.cells[1].reason = "checksum mismatch on rank 1";
  const Comparison c = compare_results(baseline(), cand, 0.5);
  EXPECT_TRUE(c.regressed);
  EXPECT_EQ(c.rows[1].verdict, "REGRESSION: failed check in candidate: checksum mismatch on rank 1");
}

TEST(ReportsCompare, CandidateSkippedWhereBaselineMeasuredRegresses) {
  Results cand = baseline();
  cand.cells[1].status = Status::Skipped;
  cand.cells[1].reason = "no GPU under gvisor";
  cand.cells[1].trials.clear();
  const Comparison c = compare_results(baseline(), cand, 0.5);
  EXPECT_TRUE(c.regressed);
  EXPECT_EQ(c.rows[1].verdict,
            "REGRESSION: candidate has no measured trial (skipped or empty) where the baseline has");
}

TEST(ReportsCompare, UnmatchedConfigurationsAreListedNotRegressions) {
  Results cand = baseline();
  cand.cells[1].tp = 4;
  const Comparison c = compare_results(baseline(), cand, 0.05);
  EXPECT_FALSE(c.regressed);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.rows[1].verdict, "only in baseline");
  EXPECT_EQ(c.rows[2].verdict, "only in candidate");
  EXPECT_FALSE(c.rows[1].pause.ratio.has_value());
  EXPECT_THROW(compare_results(baseline(), cand, -0.1), std::invalid_argument);
}

Results with_pause(double pause) {
  Results r = baseline();
  for (Trial& t : r.cells[0].trials) t.times_s["pause"] = pause;
  return r;
}

TEST(ReportsCompare, RegressionJustAboveThresholdAndNotJustBelowOrAt) {
  EXPECT_TRUE(compare_results(baseline(), with_pause(1.1001), 0.10).regressed);
  EXPECT_FALSE(compare_results(baseline(), with_pause(1.0999), 0.10).regressed);
  EXPECT_FALSE(compare_results(baseline(), with_pause(1.1), 0.10).regressed);  // exactly 10% is allowed
}

TEST(ReportsCompare, PrepareAndCommitAreJudgedToo) {
  Results base = baseline(), cand = baseline();
  for (Trial& t : base.cells[1].trials) t.times_s["prepare"] = 4.0, t.times_s["commit"] = 1.0;
  for (Trial& t : cand.cells[1].trials) t.times_s["prepare"] = 5.0, t.times_s["commit"] = 1.5;
  const Comparison c = compare_results(base, cand, 0.10);
  EXPECT_TRUE(c.regressed);
  EXPECT_DOUBLE_EQ(*c.rows[1].prepare.ratio, 1.25);
  EXPECT_EQ(c.rows[1].verdict, "REGRESSION: prepare 1.25x > 1.10x; commit 1.50x > 1.10x");
}

TEST(ReportsCompare, ConfigurationMismatchNamesConfigurationAndField) {
  EXPECT_EQ(configuration_mismatch(baseline(), candidate()), std::nullopt);
  Results cand = baseline();
  cand.cells[1].tp = 4;
  EXPECT_EQ(configuration_mismatch(baseline(), cand), "m/disk/native/tp2: in baseline only");
  Results base = baseline();
  cand = baseline();
  base.cells[0].extra["layers"] = 4;
  cand.cells[0].extra["layers"] = 8;
  EXPECT_EQ(configuration_mismatch(base, cand), "m/cpu/native/tp2: layers 4 in baseline, 8 in candidate");
  cand.cells[0].extra.erase("layers");
  EXPECT_EQ(configuration_mismatch(base, cand), "m/cpu/native/tp2: layers 4 in baseline, absent in candidate");
}

TEST(ReportsCompare, TableMarkdown) {
  const std::string expected =
      "| Model | Mode | Runtime | Prepare ratio | Commit ratio | Pause base | Pause cand | Pause ratio | Loop base | Loop cand | Loop ratio | Verdict                         |\n"
      "| ----- | ---- | ------- | ------------: | -----------: | ---------: | ---------: | ----------: | --------: | --------: | ---------: | ------------------------------- |\n"
      "|       |      |         |               |              |        (s) |        (s) |             |       (s) |       (s) |            |                                 |\n"
      "| m     | cpu  | native  |           n/a |          n/a |      1.000 |      1.100 |        1.10 |     10.00 |     10.00 |       1.00 | REGRESSION: pause 1.10x > 1.05x |\n"
      "| m     | disk | native  |           n/a |          n/a |      20.00 |      20.00 |        1.00 |     80.00 |     80.00 |       1.00 | ok                              |\n";
  EXPECT_EQ(render_markdown(comparison_table(compare_results(baseline(), candidate(), 0.05))), expected);
}

}  // namespace
}  // namespace wsb
