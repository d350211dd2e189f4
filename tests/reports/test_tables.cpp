// Exact rendering of the summary (seed-style), phase and fleet tables, markdown and terminal text.
#include <gtest/gtest.h>

#include "reports/checks_table.hpp"
#include "reports/host_table.hpp"
#include "reports/memory_table.hpp"
#include "reports/phase_table.hpp"
#include "reports/summary_table.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

TEST(ReportsTables, SeedStyleSummaryMarkdown) {
  const Results r = testing::two_cell_results();
  const std::string expected =
      // Results of builds that recorded neither the pause bound nor the stall show n/a there.
      "| Model           | Mode | Runtime |   n |   Pause range | Pause \u2264 commit call | Max stall range | Complete loop range | Checks                                  |\n"
      "| --------------- | ---- | ------- | --: | ------------: | ------------------: | --------------: | ------------------: | --------------------------------------- |\n"
      "| llama-tiny-bf16 | disk | native  |   3 | 0.512\u20130.530 s |                 n/a |             n/a |             20.44 s | pass                                    |\n"
      "| llama-tiny-bf16 | cpu  | gvisor  |   2 | 0.040\u20130.041 s |                 n/a |             n/a |        3.10\u201312.50 s | FAIL: fingerprint mismatch after commit |\n";
  EXPECT_EQ(render_markdown(summary_table(r.cells)), expected);
}

TEST(ReportsTables, SeedStyleSummaryTerminalText) {
  const Results r = testing::two_cell_results();
  const std::string expected =
      "# Model            Mode  Runtime  n    Pause range  Pause \u2264 commit call  Max stall range  Complete loop range  Checks\n"
      "  llama-tiny-bf16  disk  native   3  0.512\u20130.530 s                  n/a              n/a              20.44 s  pass\n"
      "  llama-tiny-bf16  cpu   gvisor   2  0.040\u20130.041 s                  n/a              n/a         3.10\u201312.50 s  FAIL: fingerprint mismatch after commit\n";
  EXPECT_EQ(render_text(summary_table(r.cells)), expected);
}

TEST(ReportsTables, SummaryChecksColumnForSkippedAndCheckOnlyFailures) {
  Cell skipped = testing::cell("kimi-k2.6-nvfp4", "cpu", "gvisor", 4, "h1", {});
  skipped.status = Status::Skipped;
  skipped.reason = "no CUDA inside gVisor";
  Cell check_failed = testing::cell("m", "disk", "native", 1, "h1", {{1.0, 2.0}});
  check_failed.trials[0].checks.push_back(Check{"pointers_unchanged", false, "rank 1 storage 7 moved", {}});
  const std::vector<Cell> cells = {skipped, check_failed};
  const Table t = summary_table(cells);
  EXPECT_EQ(format_value(t.columns[8], t.rows[0][8]), "skipped: no CUDA inside gVisor");
  EXPECT_EQ(format_value(t.columns[4], t.rows[0][4]), "n/a");
  EXPECT_EQ(format_value(t.columns[3], t.rows[0][3]), "0");
  EXPECT_EQ(format_value(t.columns[8], t.rows[1][8]), "FAIL: pointers_unchanged: rank 1 storage 7 moved");
}

TEST(ReportsTables, SummaryAddsTpOnlyWhereNeededAndHostWhenSeveral) {
  const std::vector<Cell> cells = {testing::cell("m", "cpu", "native", 2, "a", {{1.0, 2.0}}),
                                   testing::cell("m", "cpu", "native", 4, "b", {{1.0, 2.0}}),
                                   testing::cell("m", "disk", "native", 4, "b", {{1.0, 2.0}})};
  const Table t = summary_table(cells);
  ASSERT_EQ(t.columns.size(), 10u);
  EXPECT_EQ(t.columns[3].header, "Host");
  EXPECT_EQ(t.rows[0][0].text(), "m tp2");
  EXPECT_EQ(t.rows[1][0].text(), "m tp4");
  EXPECT_EQ(t.rows[2][0].text(), "m");
  EXPECT_EQ(t.rows[1][3].text(), "b");
}

// Cells that differ only in a workload field (encoding here; target, density, bucket size, checkpoint alike) would
// print identical rows: the tables then show each cell's id.
TEST(ReportsTables, RowsThatWouldLookAlikeShowTheCellId) {
  Cell xor_cell = testing::cell("m", "cpu", "native", 2, "h1", {{1.0, 2.0}});
  xor_cell.id = "m/cpu/native/tp2/xor";
  xor_cell.extra["encoding"] = "xor";
  Cell overwrite_cell = testing::cell("m", "cpu", "native", 2, "h1", {{1.0, 2.0}});
  overwrite_cell.id = "m/cpu/native/tp2/overwrite";
  overwrite_cell.extra["encoding"] = "overwrite";
  const std::vector<Cell> cells = {xor_cell, overwrite_cell};
  EXPECT_EQ(render_text(summary_table(cells)),
            "# Model  Mode  Runtime  Cell                        n  Pause range  Pause \u2264 commit call  Max stall range  "
            "Complete loop range  Checks\n"
            "  m      cpu   native   m/cpu/native/tp2/xor        1      1.000 s                  n/a              n/a  "
            "            2.000 s  pass\n"
            "  m      cpu   native   m/cpu/native/tp2/overwrite  1      1.000 s                  n/a              n/a  "
            "            2.000 s  pass\n");
  const Table checks = checks_table(cells);
  ASSERT_EQ(checks.columns[3].header, "Cell");
  EXPECT_EQ(checks.rows[1][3].text(), "m/cpu/native/tp2/overwrite");
  const Table memory = memory_table(cells);
  ASSERT_EQ(memory.columns[3].header, "Cell");
  EXPECT_EQ(memory.rows[0][3].text(), "m/cpu/native/tp2/xor");
  // Distinct rows keep the narrow table.
  const std::vector<Cell> distinct = {xor_cell, testing::cell("m", "disk", "native", 2, "h1", {{1.0, 2.0}})};
  EXPECT_EQ(summary_table(distinct).columns[3].header, "n");
  EXPECT_EQ(checks_table(distinct).columns[3].header, "n");
}

Cell phased_cell() {
  Cell c = testing::cell("llama-tiny-bf16", "cpu", "native", 1, "h1", {{0.1, 1.0}, {0.12, 1.0}});
  c.floors = Floors{64.0, 2.0, 55.0, {}};
  const double stage[] = {0.5, 0.7};
  const double h2d[] = {0.1, 0.12};
  const double preflight[] = {0.001, 0.002};
  for (size_t i = 0; i < 2; ++i) {
    c.trials[i].phases = {Phase{"prepare.stage", stage[i], 1200000000, "disk_read", {}},
                          Phase{"commit.h2d", h2d[i] / 2, 2750000000, "h2d", {}},  // one entry per rank:
                          Phase{"commit.h2d", h2d[i] / 2, 2750000000, "h2d", {}},  // summed within the trial
                          Phase{"commit.preflight", preflight[i], 0, "", {}}};
  }
  return c;
}

TEST(ReportsTables, PhaseTableWithFloorsMarkdown) {
  const std::string expected =
      "| Phase            |   n |     min |  median |     max |   bytes |   GB/s | floor               | ratio to floor |\n"
      "| ---------------- | --: | ------: | ------: | ------: | ------: | -----: | ------------------- | -------------: |\n"
      "|                  |     |     (s) |     (s) |     (s) |         | (GB/s) |                     |                |\n"
      "| prepare.stage    |   2 |   0.500 |   0.600 |   0.700 | 1.20 GB |   2.00 | disk_read 2.00 GB/s |           1.00 |\n"
      "| commit.h2d       |   2 |   0.100 |   0.110 |   0.120 | 5.50 GB |  50.00 | h2d 55.00 GB/s      |           1.10 |\n"
      "| commit.preflight |   2 | 0.00100 | 0.00150 | 0.00200 |     n/a |    n/a |                     |            n/a |\n";
  EXPECT_EQ(render_markdown(phase_table(phased_cell())), expected);
}

TEST(ReportsTables, PhaseTableTerminalTextHasUnitsLine) {
  const std::string expected =
      "# Phase             n      min   median      max    bytes    GB/s  floor                ratio to floor\n"
      "#                          (s)      (s)      (s)           (GB/s)\n"
      "  prepare.stage     2    0.500    0.600    0.700  1.20 GB    2.00  disk_read 2.00 GB/s            1.00\n"
      "  commit.h2d        2    0.100    0.110    0.120  5.50 GB   50.00  h2d 55.00 GB/s                 1.10\n"
      "  commit.preflight  2  0.00100  0.00150  0.00200      n/a     n/a                                  n/a\n";
  EXPECT_EQ(render_text(phase_table(phased_cell())), expected);
}

TEST(ReportsTables, PhaseFloorNotMeasured) {
  Cell c = phased_cell();
  c.floors->h2d_gbps.reset();
  const Table t = phase_table(c);
  EXPECT_EQ(t.rows[1][7].text(), "h2d (not measured)");
  EXPECT_EQ(format_value(t.columns[8], t.rows[1][8]), "n/a");
}

TEST(ReportsTables, FleetMeansMarkdown) {
  const std::vector<Cell> cells = {
      testing::cell("llama-tiny-bf16", "cpu", "native", 2, "a", {{0.5, 10.0}, {1.5, 12.0}}),
      testing::cell("llama-tiny-bf16", "cpu", "native", 2, "b", {{2.0, 11.0}}),
      testing::cell("llama-tiny-bf16", "cpu", "native", 2, "c", {{3.0, 12.0}}),
      testing::cell("llama-tiny-bf16", "disk", "native", 2, "a", {{20.44, 80.0}, {20.44, 81.0}}),
  };
  // Prepare and commit were not recorded by these trials; Runs = 2 + 1 + 1 and 2 trials.
  const std::string expected =
      "| Model           | Mode | Runtime | Prepare | Commit | Pause upper bound |       Envelope | Hosts | Runs |\n"
      "| --------------- | ---- | ------- | ------: | -----: | ----------------: | -------------: | ----: | ---: |\n"
      "| llama-tiny-bf16 | cpu  | native  |     n/a |    n/a |   2.000 \u00b1 2.484 s | 11.33 \u00b1 1.43 s |     3 |    4 |\n"
      "| llama-tiny-bf16 | disk | native  |     n/a |    n/a |     20.44 s \u00b1 n/a |  80.50 s \u00b1 n/a |     1 |    2 |\n";
  EXPECT_EQ(render_markdown(host_mean_table(cells)), expected);
}

TEST(ReportsTables, MarkdownEscapesPipesAndNewlines) {
  Table t;
  t.columns = {{"Checks", MetricKind::Text}};
  t.rows = {{std::string("FAIL: a|b\nc")}};
  EXPECT_EQ(render_markdown(t), "| Checks       |\n| ------------ |\n| FAIL: a\\|b c |\n");
}

}  // namespace
}  // namespace wsb
