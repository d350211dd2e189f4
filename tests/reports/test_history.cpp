// Nightly history: ordering by context, grouping by configuration, floors, regressions against the previous point,
// the exact tables of the committed nightly fixtures (tests/fixtures/history, make_history.py) and history.md.
#include "reports/history.hpp"

#include <gtest/gtest.h>

#include "reports/history_report.hpp"
#include "reports/metric_floor.hpp"
#include "reports/results_io.hpp"
#include "reports/table.hpp"

namespace wsb {
namespace {

Context ctx(const std::string& host, const std::string& commit, const std::string& date) {
  Context c;
  c.host = host;
  c.build_commit = commit;
  c.date_utc = date;
  return c;
}

const std::string kDir = std::string(WSBENCH_FIXTURES_DIR) + "/history/";

// The nights given out of order: the history orders them by date.
History nights(double threshold = 0.10, std::vector<std::string> metrics = history_metric_names()) {
  static const std::vector<Results> results = {load_results(kDir + "night-3.json"), load_results(kDir + "night-1.json"),
                                               load_results(kDir + "night-2.json")};
  static const std::vector<std::string> sources = {"night-3.json", "night-1.json", "night-2.json"};
  return build_history(results, sources, metrics, threshold);
}

TEST(ReportsHistory, RunsOrderedByDateThenCommit) {
  const History h = nights();
  ASSERT_EQ(h.runs.size(), 3u);
  EXPECT_EQ(h.runs[0].source, "night-1.json");
  EXPECT_EQ(h.runs[1].source, "night-2.json");
  EXPECT_EQ(h.runs[2].source, "night-3.json");
  EXPECT_EQ(h.runs[1].hosts, 2u);
  EXPECT_EQ(h.runs[1].build_commit, "2222222bbbb");
  EXPECT_EQ(render_markdown(history_runs_table(h)),
            "|   # | Date                 | Commit      | Hosts | Matrix | File         |\n"
            "| --: | -------------------- | ----------- | ----: | ------ | ------------ |\n"
            "|   1 | 2026-12-01T02:00:00Z | 1111111aaaa |     1 | smoke  | night-1.json |\n"
            "|   2 | 2026-12-02T02:00:00Z | 2222222bbbb |     2 | smoke  | night-2.json |\n"
            "|   3 | 2026-12-03T02:00:00Z | 3333333cccc |     1 | smoke  | night-3.json |\n");
}

TEST(ReportsHistory, SameDateOrderedByCommitThenAsGiven) {
  Results a, b, c;
  a.context = ctx("h", "bbb", "2026-12-01T00:00:00Z");
  b.context = ctx("h", "aaa", "2026-12-01T00:00:00Z");
  c.context = ctx("h", "aaa", "2026-12-01T00:00:00Z");
  const std::vector<Results> results = {a, b, c};
  const std::vector<std::string> sources = {"a", "b", "c"};
  const History h = build_history(results, sources, {"pause"}, 0.1);
  EXPECT_EQ(h.runs[0].source, "b");
  EXPECT_EQ(h.runs[1].source, "c");
  EXPECT_EQ(h.runs[2].source, "a");
}

TEST(ReportsHistory, MergedFileWithoutCommonFieldsTakesTheHosts) {
  Results r;
  r.context.host = "";
  r.hosts = {ctx("h1", "c2", "2026-12-02T03:00:00Z"),
             ctx("h2", "c1", "2026-12-02T01:00:00Z")};
  const std::vector<Results> results = {r};
  const std::vector<std::string> sources = {"fleet.json"};
  const History h = build_history(results, sources, {"pause"}, 0.1);
  EXPECT_EQ(h.runs[0].date_utc, "2026-12-02T01:00:00Z");
  EXPECT_EQ(h.runs[0].build_commit, "c2+c1");
  EXPECT_EQ(h.runs[0].hosts, 2u);
}

TEST(ReportsHistory, SeriesPerConfigurationThenMetric) {
  const History h = nights(0.10, {"commit", "pause"});
  ASSERT_EQ(h.series.size(), 4u);
  EXPECT_EQ(config_name(h.series[0].key), "llama-tiny-bf16/disk/native/tp2");
  EXPECT_EQ(h.series[0].metric, "commit");
  EXPECT_EQ(h.series[1].metric, "pause");
  EXPECT_EQ(config_name(h.series[2].key), "llama-tiny-bf16/cpu/native/tp2");
  ASSERT_EQ(h.series[1].points.size(), 3u);
  // Night 2: host means 0.0031 (h1) and 0.0033 (h2); t(0.975, 1) = 12.706; s = 0.000141421.
  EXPECT_DOUBLE_EQ(*h.series[1].points[1].mean, 0.0032);
  EXPECT_NEAR(*h.series[1].points[1].half_width, 12.706204736174707 * 0.0001414213562373095 / std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(*h.series[1].points[0].floor, 0.0011);  // commit.read_transform 1 MB at 1 GB/s + commit.copy at 10
  EXPECT_DOUBLE_EQ(*h.series[1].points[2].change, 0.004 / 0.0032);
  EXPECT_TRUE(h.series[1].points[2].regression);
  EXPECT_FALSE(h.series[1].points[1].regression);
  ASSERT_EQ(h.newest_regressions().size(), 2u);
  EXPECT_EQ(h.newest_regressions()[0]->metric, "commit");
}

TEST(ReportsHistory, ThresholdDecidesTheRegression) {
  // 1.25x regresses beyond 10% and 24%, not beyond 25% (1.2500000000000002 > 1.25 would need a margin).
  EXPECT_TRUE(nights(0.10, {"pause"}).series[0].points[2].regression);
  EXPECT_TRUE(nights(0.24, {"pause"}).series[0].points[2].regression);
  EXPECT_FALSE(nights(0.26, {"pause"}).series[0].points[2].regression);
}

TEST(ReportsHistory, RejectsBadArguments) {
  const std::vector<Results> results(1);
  const std::vector<std::string> sources = {"a"};
  EXPECT_THROW(build_history(results, {}, {"pause"}, 0.1), std::invalid_argument);
  EXPECT_THROW(build_history(results, sources, {}, 0.1), std::invalid_argument);
  EXPECT_THROW(build_history(results, sources, {"stall"}, 0.1), std::invalid_argument);
  EXPECT_THROW(build_history(results, sources, {"pause"}, -0.1), std::invalid_argument);
}

TEST(ReportsHistory, PauseTableOfTheDiskConfiguration) {
  const History h = nights();
  EXPECT_EQ(render_markdown(history_table(h, h.series[0])),
            "| Date                 | Commit      | Hosts |    Mean | 95% CI ± |   Floor | Ratio to floor | vs previous "
            "| Verdict                    |\n"
            "| -------------------- | ----------- | ----: | ------: | -------: | ------: | -------------: | ----------: "
            "| -------------------------- |\n"
            "|                      |             |       |     (s) |      (s) |     (s) |                |             "
            "|                            |\n"
            "| 2026-12-01T02:00:00Z | 1111111aaaa |     1 | 0.00300 |      n/a | 0.00110 |           2.73 |         n/a "
            "|                            |\n"
            "| 2026-12-02T02:00:00Z | 2222222bbbb |     2 | 0.00320 |  0.00127 | 0.00110 |           2.91 |        1.07 "
            "|                            |\n"
            "| 2026-12-03T02:00:00Z | 3333333cccc |     1 | 0.00400 |      n/a | 0.00110 |           3.64 |        1.25 "
            "| REGRESSION (1.25x > 1.10x) |\n");
}

TEST(ReportsHistory, PrepareTableOfTheCpuConfigurationWithAFailedCheck) {
  const History h = nights();
  ASSERT_EQ(h.series[6].metric, "prepare");
  EXPECT_EQ(render_text(history_table(h, h.series[6])),
            "# Date                  Commit       Hosts     Mean  95% CI ±     Floor  Ratio to floor  vs previous  "
            "Verdict\n"
            "#                                               (s)       (s)       (s)\n"
            "  2026-12-01T02:00:00Z  1111111aaaa      1  0.00500       n/a  0.000210           23.81          n/a\n"
            "  2026-12-02T02:00:00Z  2222222bbbb      2  0.00500     0.000  0.000210           23.81         1.00\n"
            "  2026-12-03T02:00:00Z  3333333cccc      1  0.00500       n/a  0.000210           23.81         1.00  "
            "checks failed\n");
}

TEST(ReportsHistory, MetricFloors) {
  const Results r = load_results(kDir + "night-1.json");
  const Cell& disk = r.cells[0];
  EXPECT_DOUBLE_EQ(*metric_floor_seconds(disk, "prepare"), 0.002);  // seed + apply_verify_write, 1 MB at 1 GB/s
  EXPECT_DOUBLE_EQ(*metric_floor_seconds(disk, "commit"), 0.0011);
  EXPECT_DOUBLE_EQ(*metric_floor_seconds(disk, "pause"), 0.0011);
  EXPECT_DOUBLE_EQ(*metric_floor_seconds(disk, "envelope"), 0.0031);
  EXPECT_FALSE(metric_floor_seconds(disk, "native_load").has_value());
  Cell no_floors = disk;
  no_floors.floors.reset();
  EXPECT_FALSE(metric_floor_seconds(no_floors, "pause").has_value());
}

TEST(ReportsHistory, MetricList) {
  EXPECT_EQ(parse_metric_list("commit,pause", "--metric"), (std::vector<std::string>{"commit", "pause"}));
  auto error = [](const std::string& text) {
    try {
      parse_metric_list(text, "--metric");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("pause,loop"), "--metric: 'loop' is not one of pause, envelope, prepare, commit");
  EXPECT_EQ(error(""), "--metric: '' is not one of pause, envelope, prepare, commit");
  EXPECT_EQ(error("pause,pause"), "--metric: 'pause' is given twice");
}

TEST(ReportsHistory, PlotOfASeries) {
  const History h = nights();
  const Plot p = history_plot(h, h.series[0]);
  EXPECT_EQ(p.title, "llama-tiny-bf16/disk/native/tp2: pause");
  EXPECT_EQ(p.value_title, "pause mean, 95% CI over hosts");
  EXPECT_EQ(p.marked_title, "regression > 10% vs previous");
  ASSERT_EQ(p.points.size(), 3u);
  EXPECT_EQ(p.points[1].label, "2026-12-02\n2222222bbbb");
  EXPECT_DOUBLE_EQ(*p.points[1].low, 0.0032 - *h.series[0].points[1].half_width);
  EXPECT_FALSE(p.points[0].low.has_value());
  EXPECT_FALSE(p.points[1].marked);
  EXPECT_TRUE(p.points[2].marked);
  const auto jobs = history_plot_jobs(h);
  ASSERT_EQ(jobs.size(), 8u);
  EXPECT_EQ(jobs[0].stem, "llama-tiny-bf16-disk-native-tp2-pause");
  EXPECT_EQ(jobs[7].stem, "llama-tiny-bf16-cpu-native-tp2-commit");
}

TEST(ReportsHistory, MarkdownWithAndWithoutPlots) {
  const History h = nights(0.10, {"pause"});
  const auto jobs = history_plot_jobs(h);
  const std::string with = render_history_markdown(h, jobs, {jobs[0].stem}, "");
  EXPECT_NE(with.find("## Regressions in the newest point\n\n- `llama-tiny-bf16/disk/native/tp2` pause: 1.25x the "
                      "previous point (2026-12-03T02:00:00Z 3333333cccc)\n"),
            std::string::npos);
  EXPECT_NE(with.find("\n## `llama-tiny-bf16/disk/native/tp2`\n\n### pause\n\n![pause of "
                      "llama-tiny-bf16/disk/native/tp2](llama-tiny-bf16-disk-native-tp2-pause.svg)\n\n| Date"),
            std::string::npos);
  // The second series' plot was not drawn: no image for it.
  EXPECT_NE(with.find("\n## `llama-tiny-bf16/cpu/native/tp2`\n\n### pause\n\n| Date"), std::string::npos);
  const std::string without = render_history_markdown(h, jobs, {}, "No plots: gnuplot was not found.");
  EXPECT_EQ(without.find("!["), std::string::npos);
  EXPECT_NE(without.find("\n\nNo plots: gnuplot was not found.\n\n## Regressions"), std::string::npos);
}

}  // namespace
}  // namespace wsb
