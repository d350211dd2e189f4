// Per-cell statistics and the cross-host Student-t interval.
#include "reports/stats.hpp"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "reports/format.hpp"
#include "reports/host_stats.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

TEST(ReportsStats, MedianOfOddAndEvenCounts) {
  const std::vector<double> odd = {3.0, 1.0, 2.0};
  const std::vector<double> even = {4.0, 1.0, 3.0, 2.0};
  EXPECT_EQ(*median(odd), 2.0);
  EXPECT_EQ(*median(even), 2.5);
  EXPECT_FALSE(median(std::vector<double>{}).has_value());
}

TEST(ReportsStats, SummaryOfSamples) {
  const std::vector<double> s = {0.530, 0.512, 0.521, 0.6};
  const Summary sum = *summarize(s);
  EXPECT_EQ(sum.n, 4u);
  EXPECT_EQ(sum.min, 0.512);
  EXPECT_EQ(sum.max, 0.6);
  EXPECT_DOUBLE_EQ(sum.mean, (0.530 + 0.512 + 0.521 + 0.6) / 4);
  EXPECT_DOUBLE_EQ(sum.median, (0.521 + 0.530) / 2);
  EXPECT_FALSE(summarize(std::vector<double>{}).has_value());
}

TEST(ReportsStats, TimeSamplesUseEveryTrialThatHasTheKeyIncludingFailedOnes) {
  Cell c = testing::cell("m", "disk", "native", 1, "h", {{1.0, 10.0}, {2.0, 20.0}, {3.0, 30.0}});
  c.trials[1].status = Status::Fail;
  c.trials[2].times_s.erase("pause");
  EXPECT_EQ(time_samples(c, "pause"), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(time_samples(c, "envelope"), (std::vector<double>{10.0, 20.0, 30.0}));
  EXPECT_TRUE(time_samples(c, "max_stall").empty());
  EXPECT_FALSE(time_summary(c, "max_stall").has_value());
}

// Closed forms: dof 1 is Cauchy, t = tan(pi (p - 1/2)); dof 2 gives t = (2p - 1) / sqrt(2 p (1 - p)).
// (The often-quoted 4.302652729911275 for dof 2 is off by 1.6e-10; Boost matches the closed form.)
const double kT975Dof2 = 0.95 / std::sqrt(2 * 0.975 * 0.025);  // 4.302652729749464

TEST(ReportsStats, StudentQuantileMatchesClosedForms) {
  EXPECT_NEAR(student_t_quantile(0.975, 2), kT975Dof2, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302652729911275, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.975, 1), std::tan(std::numbers::pi * 0.475), 1e-9);
  EXPECT_THROW(student_t_quantile(0.975, 0), std::domain_error);
}

TEST(ReportsStats, HostMeansOneTwoThreeGiveMeanTwoAndStudentHalfWidth) {
  const std::vector<double> means = {1.0, 2.0, 3.0};
  const HostMeanStat s = *host_mean_stat(means);
  EXPECT_EQ(s.hosts, 3u);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  ASSERT_TRUE(s.half_width.has_value());
  EXPECT_NEAR(*s.half_width, kT975Dof2 * 1.0 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(format_mean_ci(s.mean, s.half_width), "2.000 \u00b1 2.484 s");
}

TEST(ReportsStats, OneHostHasNoInterval) {
  const std::vector<double> means = {1.5};
  const HostMeanStat s = *host_mean_stat(means);
  EXPECT_EQ(s.hosts, 1u);
  EXPECT_EQ(s.mean, 1.5);
  EXPECT_FALSE(s.half_width.has_value());
}

TEST(ReportsStats, RepeatsOnOneHostPoolIntoThatHostAndNeverAddHosts) {
  // Host a: two cells (a repeat), trials 0.5, 1.5 and 1.0 -> host mean 1.0. Hosts b, c: 2.0, 3.0.
  // Equal weight per host: a naive mean over all five trials would be 1.6.
  std::vector<Cell> cells = {
      testing::cell("m", "cpu", "native", 2, "a", {{0.5, 5}, {1.5, 5}}),
      testing::cell("m", "cpu", "native", 2, "b", {{2.0, 5}}),
      testing::cell("m", "cpu", "native", 2, "a", {{1.0, 5}}),
      testing::cell("m", "cpu", "native", 2, "c", {{3.0, 5}}),
      testing::cell("m", "cpu", "native", 4, "a", {{9.0, 5}}),  // another tp: another configuration
  };
  const std::vector<ConfigGroup> groups = group_by_config(cells);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].hosts, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(groups[0].cells.size(), 4u);
  EXPECT_EQ(host_means(groups[0], "pause"), (std::vector<double>{1.0, 2.0, 3.0}));
  const HostMeanStat s = *group_host_stat(groups[0], "pause");
  EXPECT_EQ(s.hosts, 3u);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_NEAR(*s.half_width, kT975Dof2 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(groups[1].key.tp, 4);
  EXPECT_EQ(groups[1].hosts, (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace wsb
