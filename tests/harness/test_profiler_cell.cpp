// End to end: one profiler cell per mode on the tiny model — publish, fresh engines, probes during prepare,
// commit, every check — must pass with every check recorded and every time measured.
#include <gtest/gtest.h>

#include "harness/profiler.hpp"
#include "reports/results_json.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

class ProfilerCell : public ::testing::TestWithParam<std::string> {};

TEST_P(ProfilerCell, PassesEveryCheck) {
  test::TempDir dir;
  MatrixCell cell;
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of(GetParam());
  cell.tp = 2;
  cell.n = 2;
  cell.seed = 3;
  cell.id = "tiny/" + cell.mode_label();
  cell.floor_bytes = 8 << 20;
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  ASSERT_EQ(result["trials"].size(), 2u);
  const std::vector<std::string> expected_checks{
      "update_changes_fingerprint", "update_succeeds", "probes_exact", "generation_during_prepare",
      "probes_after_commit", "version_is_target", "checksums_equal_native_load", "storage_pointers_unchanged",
      "missing_target_rejected"};
  for (const auto& trial : result["trials"]) {
    std::vector<std::string> names;
    for (const auto& check : trial["checks"]) {
      if (check["name"] != "fresh_engines_agree") names.push_back(check["name"]);
      EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
    }
    EXPECT_EQ(names, expected_checks);
    for (const char* key : {"prepare", "commit", "pause", "envelope", "max_stall", "native_load"}) {
      ASSERT_TRUE(trial["times_s"].contains(key)) << key;
      EXPECT_GT(trial["times_s"][key].get<double>(), 0.0) << key;
    }
    EXPECT_LE(trial["times_s"]["pause"].get<double>(), trial["times_s"]["commit"].get<double>());
    EXPECT_LT(trial["times_s"]["prepare"].get<double>(), trial["times_s"]["envelope"].get<double>());
    EXPECT_GT(trial["probe"]["before_commit"].get<int>(), 0);
  }
  EXPECT_GT(result["floors"]["host_memcpy_gbps"].get<double>(), 0.0);
  EXPECT_GT(result["floors"]["disk_read_gbps"].get<double>(), 0.0);
  EXPECT_FALSE(std::filesystem::exists(dir / "work"));  // the workdir is removed unless kept
}

INSTANTIATE_TEST_SUITE_P(Modes, ProfilerCell, ::testing::Values("disk", "cpu"));

TEST(ProfilerCellSteady, TheMeasuredUpdateIsTheLastOfSeveralOnOneEngine) {
  // Disk mode, v0 -> v1 first (unmeasured), then the measured catch-up v1 -> v3 from the materialized v1.
  test::TempDir dir;
  MatrixCell cell;
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of("disk");
  cell.tp = 2;
  cell.seed = 3;
  cell.publish_versions = 3;
  cell.target = 3;
  cell.updates = 2;
  cell.id = "tiny/disk/steady";
  cell.floor_bytes = 8 << 20;
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  const auto& trial = result["trials"][0];
  ASSERT_EQ(trial["earlier_updates"].size(), 1u);
  EXPECT_EQ(trial["earlier_updates"][0]["target"], 1);
  for (const auto& check : trial["checks"]) EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
  std::vector<std::string> prepare_phases;
  for (const auto& phase : trial["phases"]) {
    const std::string name = phase["name"];
    if (name.rfind("prepare.", 0) == 0) prepare_phases.push_back(name);
    if (name == "prepare.materialize") {
      EXPECT_EQ(phase["floor"], "disk_read_write");
    }
  }
  EXPECT_EQ(prepare_phases, (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  const auto& floors = result["floors"];
  EXPECT_GT(floors["disk_write_gbps"].get<double>(), 0.0);
  const double r = floors["disk_read_gbps"].get<double>(), w = floors["disk_write_gbps"].get<double>();
  EXPECT_DOUBLE_EQ(floors["disk_read_write_gbps"].get<double>(), 1.0 / (1.0 / r + 1.0 / w));
}

// Density 0: identity deltas. The update must leave the fingerprint as it was (instead of changing it) and pass
// every other check as a real update does.
TEST(ProfilerCellIdentity, ZeroDensityPassesWithTheFingerprintKept) {
  test::TempDir dir;
  MatrixCell cell;
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of("cpu");
  cell.tp = 2;
  cell.n = 1;
  cell.seed = 3;
  cell.density = 0.0;
  cell.id = "tiny/identity";
  cell.floor_bytes = 8 << 20;
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  const auto& check = result["trials"][0]["checks"][0];
  EXPECT_EQ(check["name"], "identity_keeps_fingerprint");
  EXPECT_TRUE(check["pass"].get<bool>());
  EXPECT_EQ(result["publications"][1]["changed_values"], 0);
}

TEST(ProfilerCellSetup, UnknownModelFailsTheCellWithTheReason) {
  test::TempDir dir;
  MatrixCell cell;
  cell.model = "no-such-model";
  cell.sync = test::sync_of("cpu");
  cell.id = "bad";
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  EXPECT_EQ(result["status"], "fail");
  EXPECT_NE(result["reason"].get<std::string>().find("no-such-model"), std::string::npos) << result["reason"];
}

}  // namespace
}  // namespace wsb
