// report.md and the terminal summary.
#include "reports/report_markdown.hpp"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "reports/merge.hpp"
#include "reports/summary_table.hpp"
#include "reports/terminal.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Results report_results() {
  Results r = testing::two_cell_results();
  r.context.memory_bytes = 137438953472ULL;
  r.context.gpus = nlohmann::json::array({"NVIDIA H200", "NVIDIA H200"});
  r.context.extra = {{"cuda", "12.4"}};
  r.cells[0].trials[0].phases = {Phase{"commit.h2d", 0.1, 5500000000ULL, "h2d", {}}};
  r.cells[0].trials[0].memory = {{"rss_peak_bytes", 123456789}};
  return r;
}

TEST(ReportsReport, SectionsInOrderWithContextSummaryAndFailures) {
  const Results r = report_results();
  const std::string md = render_report_markdown(r);
  const std::string head =
      "# wsbench results \u2014 matrix `smoke`\n"
      "\n"
      "## Context\n"
      "\n"
      "| Field     | Value           |\n"
      "| --------- | --------------- |\n"
      "| host      | h1              |\n"
      "| cpu_model | AMD EPYC 9654   |\n"
      "| cpu_cores | 16              |\n"
      "| memory    | 137.44 GB       |\n"
      "| gpus      | 2 \u00d7 NVIDIA H200 |\n"
      "| kernel    | 6.1.0-fc-test   |\n"
      "| cuda      | 12.4            |\n"
      "\n"
      "## Summary\n\n";
  EXPECT_EQ(md.substr(0, head.size()), head);
  EXPECT_TRUE(contains(md, head + "Pause: scheduler gate closed"));
  EXPECT_TRUE(contains(md, render_markdown(summary_table(r.cells))));
  EXPECT_FALSE(contains(md, "## Fleet means"));  // one host
  EXPECT_TRUE(contains(md,
                       "\n## Failures\n\n"
                       "- `llama-tiny-bf16/cpu/gvisor/tp2` on h1, trial 1: **trial failed** \u2014 fingerprint mismatch "
                       "after commit\n"
                       "- `llama-tiny-bf16/cpu/gvisor/tp2` on h1, trial 1: **fingerprint_after_commit** \u2014 tokens "
                       "differ at position 3\n"
                       "\n## Checks\n"));
  EXPECT_TRUE(contains(md, "### `llama-tiny-bf16/disk/native/tp2` on h1\n\n| Phase      |   n |"));
  EXPECT_LT(md.find("## Summary"), md.find("## Failures"));
  EXPECT_LT(md.find("## Failures"), md.find("## Checks"));
  EXPECT_LT(md.find("## Checks"), md.find("## Memory"));
  EXPECT_LT(md.find("## Memory"), md.find("## Phases"));
  EXPECT_TRUE(contains(md, "\n## Memory\n\nMaxima over trials"));
  EXPECT_LT(md.find("## Phases"), md.find("## Raw samples"));
}

TEST(ReportsReport, RawSamplesInACollapsedDetailsBlock) {
  const std::string md = render_report_markdown(report_results());
  const size_t open = md.find("\n## Raw samples\n\n<details>\n<summary>Per-trial numbers (times in seconds, exact)</summary>\n");
  ASSERT_NE(open, std::string::npos);
  EXPECT_EQ(md.substr(md.size() - 12), "\n</details>\n");
  EXPECT_TRUE(contains(md.substr(open),
                       "### `llama-tiny-bf16/disk/native/tp2` on h1\n\n"
                       "| trial | status | envelope (s) | pause (s) | memory.rss_peak_bytes |\n"
                       "| ----: | ------ | -----------: | --------: | --------------------: |\n"
                       "|     0 | pass   |        20.44 |      0.53 |             123456789 |\n"
                       "|     1 | pass   |        20.44 |     0.512 |                   n/a |\n"
                       "|     2 | pass   |        20.44 |     0.521 |                   n/a |\n"));
}

TEST(ReportsReport, MergedResultsShowHostsAndFleetMeans) {
  const std::vector<Results> inputs = {
      testing::results_for("a", {testing::cell("m", "cpu", "native", 2, "a", {{1.0, 10.0}})}),
      testing::results_for("b", {testing::cell("m", "cpu", "native", 2, "b", {{2.0, 12.0}})})};
  const std::string md = render_report_markdown(merge_results(inputs), ReportOptions{"fleet", false, false});
  EXPECT_TRUE(contains(md, "| Host | CPU           | cores |"));
  EXPECT_TRUE(contains(md, "\n## Fleet means\n"));
  EXPECT_TRUE(contains(md, "|    n/a |   1.500 \u00b1 6.353 s | 11.00 \u00b1 12.71 s |     2 |    2 |\n"));
  EXPECT_TRUE(contains(md, "\n## Failures\n\nNone.\n"));
  EXPECT_FALSE(contains(md, "## Phases"));
  EXPECT_FALSE(contains(md, "<details>"));
  EXPECT_EQ(md.substr(0, 11), "# fleet \u2014");
}

TEST(ReportsReport, WriteReportMarkdownWritesTheRenderedText) {
  const auto path = std::filesystem::temp_directory_path() / ("wsb_report_" + std::to_string(std::random_device{}()) + ".md");
  const Results r = report_results();
  write_report_markdown(path, r);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(text.str(), render_report_markdown(r));
  std::filesystem::remove(path);
  EXPECT_THROW(write_report_markdown("/nonexistent-dir/report.md", r), std::runtime_error);
}

TEST(ReportsReport, TerminalSummary) {
  const std::string out = render_terminal_summary(report_results(), true);
  EXPECT_EQ(out.substr(0, 11), "## Summary\n");
  EXPECT_TRUE(contains(out, "\n## Failures\n"
                            "  llama-tiny-bf16/cpu/gvisor/tp2 trial 1: trial failed - fingerprint mismatch after commit\n"
                            "  llama-tiny-bf16/cpu/gvisor/tp2 trial 1: fingerprint_after_commit - tokens differ at position 3\n"));
  EXPECT_TRUE(contains(out, "\n## Phases llama-tiny-bf16/disk/native/tp2 on h1\n# Phase       n"));
}

}  // namespace
}  // namespace wsb
