// Exact memory and checks tables from hand-built trial blocks.
#include <gtest/gtest.h>

#include "reports/checks_table.hpp"
#include "reports/memory_table.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

using nlohmann::json;

Cell memory_cell() {
  Cell c = testing::cell("m", "cpu", "native", 2, "h1", {{0.1, 1.0}, {0.2, 2.0}});
  c.trials[0].memory = {{"rss_peak_bytes", 2'000'000'000},
                        {"mem_available_bytes", 50'000'000'000},
                        {"cached_bytes", 3'000'000'000},
                        {"device_used_bytes", {1'000'000'000, 7'500'000'000}},
                        {"mode_canonical_bytes", 0},
                        {"mode_rank_image_bytes", 1'500'000'000},
                        {"mode_staging_bytes", 500'000'000},
                        {"prepare_peak",
                         {{"samples", 40},
                          {"rss_peak_bytes", 1'800'000'000},
                          {"cgroup_current_peak_bytes", 4'200'000'000},
                          {"mem_available_min_bytes", 48'000'000'000},
                          {"cached_peak_bytes", 3'500'000'000},
                          {"device_used_peak_bytes", {1'000'000'000, 8'000'000'000}}}},
                        {"commit_peak", {{"samples", 3}, {"rss_peak_bytes", 1'900'000'000}}}};
  c.trials[1].memory = {{"rss_peak_bytes", 2'100'000'000},
                        {"mem_available_bytes", 49'000'000'000},
                        {"commit_peak", {{"samples", 2}, {"rss_peak_bytes", 2'050'000'000},
                                         {"cgroup_current_peak_bytes", 4'000'000'000},
                                         {"mem_available_min_bytes", 47'500'000'000}}}};
  return c;
}

TEST(ReportsMemoryTable, PeaksAreMaximaAndMemAvailableTheMinimumOverTrialsAndWindows) {
  const std::vector<Cell> cells = {memory_cell()};
  const Table t = memory_table(cells);
  ASSERT_EQ(t.rows.size(), 1u);
  const auto& row = t.rows[0];
  EXPECT_DOUBLE_EQ(row[4].number(), 2'100'000'000);   // Peak RSS
  EXPECT_DOUBLE_EQ(row[5].number(), 1'800'000'000);   // Prepare peak RSS
  EXPECT_DOUBLE_EQ(row[6].number(), 2'050'000'000);   // Commit peak RSS
  EXPECT_DOUBLE_EQ(row[7].number(), 4'200'000'000);   // cgroup peak
  EXPECT_DOUBLE_EQ(row[8].number(), 47'500'000'000);  // MemAvailable min
  EXPECT_DOUBLE_EQ(row[9].number(), 3'500'000'000);   // Page cache max
  EXPECT_DOUBLE_EQ(row[10].number(), 8'000'000'000);  // Device used peak
  EXPECT_DOUBLE_EQ(row[11].number(), 2'000'000'000);  // Mode buffers
  const std::string expected =
      "| Model | Mode | Runtime |   n | Peak RSS | Prepare peak RSS | Commit peak RSS | cgroup peak | MemAvailable min "
      "| Page cache max | Device used peak | Mode buffers |\n"
      "| ----- | ---- | ------- | --: | -------: | ---------------: | --------------: | ----------: | ---------------: "
      "| -------------: | ---------------: | -----------: |\n"
      "| m     | cpu  | native  |   2 |  2.10 GB |          1.80 GB |         2.05 GB |     4.20 GB |         47.50 GB "
      "|        3.50 GB |          8.00 GB |      2.00 GB |\n";
  EXPECT_EQ(render_markdown(t), expected);
}

TEST(ReportsMemoryTable, MissingBlocksAreNotAvailable) {
  const std::vector<Cell> cells = {testing::cell("m", "disk", "native", 1, "h1", {{0.1, 1.0}})};
  const Table t = memory_table(cells);
  for (size_t c = 4; c < t.columns.size(); ++c) EXPECT_EQ(format_value(t.columns[c], t.rows[0][c]), "n/a") << c;
  EXPECT_EQ(memory_number(json{{"a", {{"b", 3}}}}, "a", "b"), 3.0);
  EXPECT_EQ(memory_number(json{{"a", "x"}}, "a"), std::nullopt);
}

Cell checked_cell() {
  Cell c = testing::cell("m", "cpu", "native", 2, "h1", {{0.1, 1.0}, {0.2, 2.0}, {0.3, 3.0}});
  for (Trial& t : c.trials) {
    t.checks.clear();
    for (const std::string& name : checks_table_names()) t.checks.push_back(Check{name, true, "", json::object()});
    t.checks.push_back(Check{"fresh_engines_agree", true, "", json::object()});
  }
  c.trials[1].checks[2].pass = false;  // checksums_equal_native_load
  c.trials[2].checks.back().pass = false;
  c.trials[2].checks.push_back(Check{"update_succeeds", false, "boom", json::object()});
  c.trials[0].checks.erase(c.trials[0].checks.begin() + 3);  // trial 0 did not record pointers
  c.trials[1].extra["checksum_basis"] = "POST /weights_checker (sglang)";  // trial 0 predates the record
  return c;
}

TEST(ReportsChecksTable, PassedOverRecordedPerCheckAndOther) {
  const std::vector<Cell> cells = {checked_cell(), testing::cell("m", "disk", "native", 2, "h1", {})};
  const std::string expected =
      "| Model | Mode | Runtime |   n | Fingerprints | Generation during prepare | Native equality | Pointers "
      "| Missing target | Version | Other                         | Native equality via            |\n"
      "| ----- | ---- | ------- | --: | ------------ | ------------------------- | --------------- | -------- "
      "| -------------- | ------- | ----------------------------- | ------------------------------ |\n"
      "| m     | cpu  | native  |   3 | 3/3          | 3/3                       | FAIL 2/3        | 2/2      "
      "| 3/3            | 3/3     | FAIL 2/4: fresh_engines_agree | POST /weights_checker (sglang) |\n"
      "| m     | disk | native  |   0 | n/a          | n/a                       | n/a             | n/a      "
      "| n/a            | n/a     | n/a                           | n/a                            |\n";
  EXPECT_EQ(render_markdown(checks_table(cells)), expected);
}

}  // namespace
}  // namespace wsb
