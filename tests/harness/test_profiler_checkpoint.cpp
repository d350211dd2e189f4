// Cells on a real checkpoint (the transformers-made hf-llama-tiny): synthetic versions perturbing its weights, and
// the real AdamW step to hf-llama-tiny-step1 as DELTA v1, in every sync mode on the CPU engine. Every check must pass:
// probes, checksums per rank against a fresh native load of the target (for the real pair: of the -step1 directory
// itself), storage pointers, version; the publications record the density and compression of the real delta.
#include <gtest/gtest.h>

#include "harness/profiler.hpp"
#include "reports/results_json.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kTiny = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";
const fs::path kStep1 = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny-step1";

MatrixCell checkpoint_cell(const std::string& mode, bool real_delta) {
  MatrixCell cell;
  cell.checkpoint = kTiny.string();
  cell.model = checkpoint_model_id(kTiny);
  cell.sync = test::sync_of(mode);
  if (cell.sync.mode == SyncModeKind::Refit) cell.sync.refit.bucket_bytes = 32768;  // several buckets per rank
  if (real_delta) {
    cell.checkpoints = {kStep1.string()};
    cell.publish_versions = 1;
    cell.model = checkpoint_model_id(kTiny, cell.checkpoints);
  }
  cell.tp = 2;
  cell.n = 2;
  cell.seed = 3;
  cell.id = cell.model + "/" + cell.mode_label();
  cell.floor_bytes = 8 << 20;
  return cell;
}

void expect_every_check_passes(const nlohmann::json& result) {
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  ASSERT_EQ(result["trials"].size(), 2u);
  const std::vector<std::string> every_trial{
      "update_changes_fingerprint", "update_succeeds", "probes_exact", "generation_during_prepare",
      "probes_after_commit", "version_is_target", "checksums_equal_native_load", "storage_pointers_unchanged",
      "missing_target_rejected"};
  for (size_t i = 0; i < 2; ++i) {
    std::vector<std::string> names;
    for (const auto& check : result["trials"][i]["checks"]) {
      names.push_back(check["name"]);
      EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
    }
    std::vector<std::string> expected = every_trial;
    if (i == 1) expected.insert(expected.begin(), "fresh_engines_agree");  // the second trial's boot vs the first's
    EXPECT_EQ(names, expected) << i;
  }
}

class CheckpointCell : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointCell, SyntheticVersionsOnRealWeightsPassEveryCheck) {
  test::TempDir dir;
  const MatrixCell cell = checkpoint_cell(GetParam(), false);
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  expect_every_check_passes(result);
  EXPECT_EQ(result["model"], "hf:hf-llama-tiny");
  EXPECT_EQ(result["checkpoint"], kTiny.string());
  const auto& publications = result["publications"];
  ASSERT_EQ(publications.size(), 4u);
  EXPECT_EQ(publications[0]["source"], kTiny.string());
  EXPECT_EQ(publications[0]["canonical_bytes"], 250752u);
  EXPECT_EQ(publications[1]["encoding"], "xor");
  EXPECT_EQ(publications[1]["changes"]["BF16"]["elements"], 125376u);
}

TEST_P(CheckpointCell, TheRealAdamWStepPassesEveryCheck) {
  test::TempDir dir;
  const MatrixCell cell = checkpoint_cell(GetParam(), true);
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  expect_every_check_passes(result);
  EXPECT_EQ(result["checkpoints"], nlohmann::json::array({kStep1.string()}));
  EXPECT_EQ(result["model"], "hf:hf-llama-tiny..hf-llama-tiny-step1");
  const auto& publications = result["publications"];
  ASSERT_EQ(publications.size(), 2u);
  const auto& delta = publications[1];
  EXPECT_EQ(delta["source"], kStep1.string());
  EXPECT_EQ(delta["encoding"], "xor");
  EXPECT_EQ(delta["changed_values"], 34558u);  // 27.6% of the BF16 elements (tests/fixtures/README.md)
  EXPECT_EQ(delta["changes"]["BF16"]["changed"], 34558u);
  EXPECT_DOUBLE_EQ(delta["density"].get<double>(), 34558.0 / 125376.0);
  EXPECT_DOUBLE_EQ(delta["compression_ratio"].get<double>(), 250752.0 / delta["stored_bytes"].get<double>());
  EXPECT_EQ(result["bytes"]["delta_compressed"], delta["stored_bytes"]);
}

INSTANTIATE_TEST_SUITE_P(Modes, CheckpointCell, ::testing::Values("disk", "cpu", "refit"));

TEST(CheckpointCellEncoding, AutomaticEncodingRecordsBothCandidates) {
  test::TempDir dir;
  MatrixCell cell = checkpoint_cell("cpu", true);
  cell.encoding = "auto";
  cell.n = 1;
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  const auto& delta = result["publications"][1];
  ASSERT_TRUE(delta["payload_bytes"].contains("xor"));
  ASSERT_TRUE(delta["payload_bytes"].contains("overwrite"));
  const bool xor_smaller = delta["payload_bytes"]["xor"].get<uint64_t>() <= delta["payload_bytes"]["overwrite"].get<uint64_t>();
  EXPECT_TRUE(xor_smaller);  // 27.6% of the elements: a mask beats positions
  EXPECT_EQ(delta["encoding"], "xor");
}

TEST(CheckpointCellSetup, AMismatchedFollowingCheckpointFailsTheCellNamingIt) {
  test::TempDir dir;
  MatrixCell cell = checkpoint_cell("cpu", true);
  cell.checkpoints = {(fs::path(WSBENCH_FIXTURES_DIR) / "hf-glm4_moe-tiny").string()};
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false});
  EXPECT_EQ(result["status"], "fail");
  const std::string reason = result["reason"];
  EXPECT_NE(reason.find("hf-glm4_moe-tiny/config.json"), std::string::npos) << reason;
  EXPECT_NE(reason.find("model_type"), std::string::npos) << reason;
}

}  // namespace
}  // namespace wsb
