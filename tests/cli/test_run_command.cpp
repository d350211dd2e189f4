// `wsbench run` end to end through the real executable: the gVisor smoke cells (skipped where runsc cannot run),
// --shard selection and its errors, --quiet and --json-progress.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine_api/launcher.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kSource = fs::path(WSBENCH_PROFILES_DIR) / ".." / "..";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `wsbench --profiles ... run smoke.json ARGS --out OUT`, stderr to OUT.stderr; returns the exit status.
int run_smoke(const std::string& args, const fs::path& out) {
  const std::string command = fmt::format("'{}/wsbench' --profiles '{}' run '{}' {} --out '{}' > '{}.stdout' 2> '{}.stderr'",
                                          WSBENCH_BINARY_DIR, WSBENCH_PROFILES_DIR, (kSource / "matrices" / "smoke.json").string(),
                                          args, out.string(), out.string(), out.string());
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// "" when runsc is installed and can start a sandbox here, else why not.
std::string gvisor_unavailable() {
  try {
    resolve_launcher_program(builtin_launchers().at("gvisor"));
  } catch (const std::exception& e) {
    return e.what();
  }
  if (std::system("runsc --network=none do -force-overlay=false /bin/true > /dev/null 2>&1") != 0) {
    return "runsc is installed but cannot start a sandbox here (it needs root)";
  }
  return "";
}

TEST(RunCommand, GvisorSmokeCellsPassInsideGvisor) {
  if (const std::string why = gvisor_unavailable(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir dir;
  const fs::path out = dir / "gvisor";
  ASSERT_EQ(run_smoke("--filter gvisor --json-progress", out), 0) << slurp(out.string() + ".stderr");
  const auto results = nlohmann::json::parse(slurp(out / "results.json"));
  ASSERT_EQ(results["cells"].size(), 2u);
  const std::vector<std::string> ids{"llama-tiny-bf16/disk/gvisor/tp2", "llama-tiny-bf16/cpu/gvisor/tp2"};
  for (size_t i = 0; i < 2; ++i) {
    const auto& cell = results["cells"][i];
    EXPECT_EQ(cell["id"], ids[i]);
    EXPECT_EQ(cell["status"], "pass") << cell["reason"];
    EXPECT_EQ(cell["runtime"], "gvisor");
    EXPECT_EQ(cell["runtime_detected"], "gvisor");
    ASSERT_EQ(cell["trials"].size(), 3u);
    for (const auto& trial : cell["trials"]) {
      EXPECT_EQ(trial["status"], "pass");
      EXPECT_GE(trial["checks"].size(), 9u);
      for (const auto& check : trial["checks"]) EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
    }
  }
  EXPECT_NE(results["context"]["runtime_detected"], "gvisor");  // the parent runs outside the sandbox
  // --json-progress: one JSON object per line on stderr, each cell started, reported and ended.
  std::istringstream lines(slurp(out.string() + ".stderr"));
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(lines, line);) events.push_back(nlohmann::json::parse(line));
  ASSERT_GE(events.size(), 4u);
  std::map<std::string, int> count;
  std::map<int, int> phases_per_cell;
  for (const auto& e : events) {
    count[e["event"].get<std::string>()]++;
    EXPECT_EQ(e["cells"], 2);
    if (e["event"] == "phase") {
      phases_per_cell[e["cell"].get<int>()]++;
      EXPECT_EQ(e["trials"], 3);
    }
  }
  EXPECT_EQ(count["cell_start"], 2);
  EXPECT_EQ(count["cell_end"], 2);
  EXPECT_GE(phases_per_cell[1], 1);  // each cell runs for over a second; the parent polls every 100 ms
  EXPECT_GE(phases_per_cell[2], 1);
  EXPECT_EQ(events.front()["event"], "cell_start");
  EXPECT_EQ(events.back()["event"], "cell_end");
  EXPECT_EQ(events.back()["status"], "pass");
  EXPECT_EQ(events.back()["id"], ids[1]);
}

TEST(RunCommand, ShardRunsEveryNthCellOfTheFilteredList) {
  test::TempDir dir;
  const fs::path out = dir / "shard";
  ASSERT_EQ(run_smoke("--filter '^llama-tiny-bf16/(disk|cpu)/native' --shard 1/2 --quiet", out), 0)
      << slurp(out.string() + ".stderr");
  const auto results = nlohmann::json::parse(slurp(out / "results.json"));
  ASSERT_EQ(results["cells"].size(), 1u);
  EXPECT_EQ(results["cells"][0]["id"], "llama-tiny-bf16/cpu/native/tp2");
  EXPECT_EQ(results["cells"][0]["status"], "pass");
  EXPECT_EQ(results["cells"][0]["runtime_detected"], results["context"]["runtime_detected"]);
  EXPECT_EQ(results["shard"], (nlohmann::json{{"index", 1}, {"count", 2}}));
  EXPECT_EQ(slurp(out.string() + ".stderr"), "");  // --quiet
}

TEST(RunCommand, ShardErrorsAreSetupErrors) {
  test::TempDir dir;
  const fs::path out = dir / "bad";
  EXPECT_EQ(run_smoke("--shard 2/2", out), 2);
  EXPECT_EQ(slurp(out.string() + ".stderr"), "wsbench: error (format): --shard '2/2': K must be 0..1 (0-based) for N = 2\n");
  EXPECT_FALSE(fs::exists(out / "results.json"));
  EXPECT_EQ(run_smoke("--shard 1", out), 2);
  EXPECT_EQ(slurp(out.string() + ".stderr"),
            "wsbench: error (format): --shard '1': expected K/N (0-based shard K of N shards, e.g. 0/4)\n");
}

TEST(RunCommand, AnEmptyShardWritesAnEmptyResult) {
  test::TempDir dir;
  const fs::path out = dir / "empty";
  ASSERT_EQ(run_smoke("--filter '^llama-tiny-bf16/disk/native' --shard 1/2 --quiet", out), 0)
      << slurp(out.string() + ".stderr");
  const auto results = nlohmann::json::parse(slurp(out / "results.json"));
  EXPECT_TRUE(results["cells"].empty());
}

}  // namespace
}  // namespace wsb
