// Merging results of several hosts and shards.
#include "reports/merge.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "reports/host_stats.hpp"
#include "reports/results_io.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

std::vector<Results> three_files_two_hosts() {
  Results a1 = testing::results_for("a", {testing::cell("m", "cpu", "native", 2, "a", {{1.0, 10.0}})});
  Results b = testing::results_for("b", {testing::cell("m", "cpu", "native", 2, "b", {{2.0, 12.0}})});
  Results a2 = testing::results_for("a", {testing::cell("m", "disk", "native", 2, "a", {{20.0, 80.0}})});
  b.context.cpu_cores = 32;
  a2.cells[0].host.clear();  // a shard whose cells rely on the context for their host
  return {a1, b, a2};
}

TEST(ReportsMerge, CountsDistinctHostsAndConcatenatesCells) {
  const Results m = merge_results(three_files_two_hosts());
  ASSERT_EQ(m.hosts.size(), 2u);
  EXPECT_EQ(m.hosts[0].host, "a");
  EXPECT_EQ(m.hosts[1].host, "b");
  ASSERT_EQ(m.cells.size(), 3u);
  EXPECT_EQ(m.cells[2].host, "a");
  EXPECT_EQ(m.matrix, "smoke");
  // Fields the hosts agree on stay; the ones that differ are emptied.
  EXPECT_EQ(m.context.host, "");
  EXPECT_EQ(m.context.cpu_cores, 0);
  EXPECT_EQ(m.context.cpu_model, "AMD EPYC 9654");
  const std::vector<ConfigGroup> groups = group_by_config(m.cells);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].hosts.size(), 2u);
  EXPECT_EQ(groups[1].hosts.size(), 1u);
}

TEST(ReportsMerge, MergingAMergedFileAgainKeepsEachHostOnce) {
  const Results first = merge_results(three_files_two_hosts());
  Results c = testing::results_for("c", {testing::cell("m", "cpu", "native", 2, "c", {{3.0, 11.0}})}, "nightly");
  Results a3 = testing::results_for("a", {testing::cell("m", "cpu", "native", 2, "a", {{1.2, 10.0}})});
  const std::vector<Results> inputs = {first, c, a3};
  const Results m = merge_results(inputs);
  ASSERT_EQ(m.hosts.size(), 3u);
  EXPECT_EQ(m.hosts[2].host, "c");
  EXPECT_EQ(m.cells.size(), 5u);
  EXPECT_EQ(m.matrix, "smoke+nightly");
  EXPECT_EQ(group_host_stat(group_by_config(m.cells)[0], "pause")->hosts, 3u);
}

TEST(ReportsMerge, SchemaMismatchNamesTheInput) {
  std::vector<Results> inputs = three_files_two_hosts();
  inputs[1].schema_version = 2;
  const std::vector<std::string> labels = {"a.json", "b.json", "a2.json"};
  try {
    merge_results(inputs, labels);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "b.json: schema_version 2 cannot be merged (this wsbench reads 1)");
  }
  EXPECT_THROW(merge_results(std::vector<Results>{}), std::invalid_argument);
}

TEST(ReportsMerge, FilesAreLoadedAndAMismatchedFileIsNamed) {
  const auto dir = std::filesystem::temp_directory_path() / ("wsb_reports_merge_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const std::vector<Results> inputs = three_files_two_hosts();
  std::vector<std::filesystem::path> paths;
  for (size_t i = 0; i < inputs.size(); ++i) {
    paths.push_back(dir / ("results_" + std::to_string(i) + ".json"));
    save_results(paths.back(), inputs[i]);
  }
  EXPECT_EQ(merge_result_files(paths), merge_results(inputs));

  nlohmann::json doc = nlohmann::json::parse(std::ifstream(paths[1]));
  doc["schema_version"] = 3;
  std::ofstream(paths[1]) << doc.dump();
  try {
    merge_result_files(paths);
    ADD_FAILURE() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), paths[1].string() + ": schema_version 3 is not supported (this wsbench reads 1)");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wsb
