// The full profiler through the HTTP adapters against real `wsbench serve --protocol P` processes on loopback:
// every protocol and mode passes every check (checksums through the protocol's own checksum endpoint against a
// fresh server on the FULL target); a server that dies mid-commit, is slow or never healthy, answers an HTTP error,
// a non-JSON or wrong-shape body, or a version going backwards makes a failed trial whose reason names the endpoint
// and the problem (never a hang).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "engine_api/http_engine_client.hpp"
#include "engine_api/protocols/protocol.hpp"
#include "harness/profiler.hpp"
#include "reports/results_json.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

MatrixCell http_cell(const std::string& mode, const std::vector<std::string>& faults = {},
                     const std::string& protocol = "stitch-staging") {
  MatrixCell cell;
  cell.protocol = protocol;
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of(mode);
  cell.engine = "http";
  cell.tp = 2;
  cell.n = 1;
  cell.seed = 3;
  cell.id = "tiny/" + mode + "/http";
  cell.floor_bytes = 1 << 20;
  cell.server_ready_timeout_s = 30;
  cell.server_request_timeout_s = 30;
  if (!faults.empty()) {
    EngineLaunch launch;
    launch.protocol = protocol;
    cell.server_command = default_serve_command(launch);
    for (const auto& f : faults) cell.server_command.insert(cell.server_command.end(), {"--fault", f});
  }
  return cell;
}

json run(const MatrixCell& cell, const test::TempDir& dir) {
  CellRunOptions options{WSBENCH_PROFILES_DIR, dir / "work", false};
  options.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
  return run_cell(cell, options);
}

/// The only trial's reason (the cell must have failed through it, not in setup).
std::string trial_reason(const json& result) {
  EXPECT_EQ(result["status"], "fail") << result.dump(2);
  EXPECT_EQ(result["trials"].size(), 1u) << result.dump(2);
  if (result["trials"].empty()) return result.value("reason", "");
  EXPECT_EQ(result["trials"][0]["status"], "fail");
  return result["trials"][0]["reason"];
}

/// One protocol, mode and pause mode of an http cell.
struct Served {
  std::string protocol;
  std::string mode;
  std::optional<PauseMode> pause;
};

class HttpProfilerCell : public ::testing::TestWithParam<Served> {};

TEST_P(HttpProfilerCell, PassesEveryCheckAgainstWsbenchServe) {
  test::TempDir dir;
  const Served& p = GetParam();
  MatrixCell cell = http_cell(p.mode, {}, p.protocol);
  cell.pause_mode = p.pause;
  cell.accept_mixed_responses = p.pause == PauseMode::InPlace;
  cell.n = 2;
  const bool checksums = make_protocol(p.protocol)->checksums().has_value();
  const json result = run(cell, dir);
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
      // vLLM has no checksum endpoint: equality rests on the fingerprints, and the check says so.
      const bool skipped = check["name"] == "checksums_equal_native_load" && !checksums;
      EXPECT_EQ(check.contains("skipped"), skipped) << check.dump();
    }
    EXPECT_EQ(names, expected_checks);
    EXPECT_EQ(trial["server"]["stop"], "sigterm");
    EXPECT_EQ(trial["server"]["status"], "exited with status 0");
    EXPECT_FALSE(trial["server"].contains("log_tail"));
    // wsbench serve measures its pause (GET /wsbench/last_update); the commit call bounds it.
    for (const char* key : {"prepare", "commit", "pause", "pause_bound", "envelope", "max_stall", "native_load"}) {
      ASSERT_TRUE(trial["times_s"].contains(key)) << key;
      EXPECT_GT(trial["times_s"][key].get<double>(), 0.0) << key;
    }
    EXPECT_LE(trial["times_s"]["pause"].get<double>(), trial["times_s"]["pause_bound"].get<double>());
    // From GET /wsbench/mode_memory: the cpu mode holds rank images, the disk mode none.
    ASSERT_TRUE(trial["memory"].contains("mode_rank_image_bytes"));
    EXPECT_EQ(trial["memory"]["mode_rank_image_bytes"].get<uint64_t>() > 0, p.mode == "cpu");
  }
  EXPECT_EQ(result["reference_server"]["status"], "exited with status 0");
  EXPECT_EQ(result["bytes"]["rank_image_per_rank"].size(), 2u);
  // The checksums of the updated server equal those of a fresh server on the FULL target: the check above; the
  // fingerprint is the embedded engine's, since the server runs it.
  EXPECT_EQ(result["trials"][0]["checks"][0]["name"], "update_changes_fingerprint");
}

std::string served_name(const ::testing::TestParamInfo<Served>& info) {
  std::string name = info.param.protocol + "_" + info.param.mode;
  if (info.param.pause) name += "_" + std::string(name_of(*info.param.pause));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, HttpProfilerCell,
    ::testing::Values(Served{"stitch-staging", "disk", {}}, Served{"stitch-staging", "cpu", {}},
                      Served{"sglang", "disk", {}}, Served{"sglang", "disk", PauseMode::Retract},
                      Served{"stitch-v0.5.15", "disk", {}}, Served{"stitch-v0.5.16", "disk", PauseMode::Drain},
                      Served{"stitch-v0.5.16", "cpu", PauseMode::InPlace}, Served{"vllm", "disk", {}}),
    served_name);

// An http cell runs the commit strategy its label names: the server gets --commit-strategy, so its prepare stages a
// delta and its commit applies it (phases only the device-delta strategy has).
TEST(HttpProfilerDeviceDelta, TheServerRunsTheCellsCommitStrategy) {
  test::TempDir dir;
  MatrixCell cell = http_cell("cpu");
  cell.sync.cpu.commit_strategy = CommitStrategy::DeviceDelta;
  cell.id = "tiny/cpu+device-delta/http";
  const json result = run(cell, dir);
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  std::set<std::string> phases;
  for (const auto& phase : result["trials"][0]["phases"]) phases.insert(phase["name"]);
  EXPECT_TRUE(phases.contains("prepare.delta_upload")) << result["trials"][0]["phases"].dump();
  EXPECT_TRUE(phases.contains("commit.delta_apply")) << result["trials"][0]["phases"].dump();
}

TEST(HttpProfilerScaled, AScaledCellStartsServersOnTheBaseProfileWithItsScale) {
  // {model} is the base id and the scale goes as --layers: a scaled id is no profile file the server could find.
  test::TempDir dir;
  MatrixCell cell = http_cell("cpu");
  cell.layers = 1;
  cell.id = "tiny/cpu/http/L1";
  const json result = run(cell, dir);
  ASSERT_EQ(result["status"], "pass") << result.dump(2);
  ProfileScale scale;
  scale.layers = 1;
  const ModelProfile scaled = scale_profile(find_profile("llama-tiny-bf16", WSBENCH_PROFILES_DIR), scale);
  EXPECT_EQ(result["bytes"]["canonical"].get<uint64_t>(), scaled.canonical_bytes());
}

TEST(HttpProfilerFaults, ServerDyingMidCommitIsAFailedTrialWithTheReason) {
  test::TempDir dir;
  const std::string reason = trial_reason(run(http_cell("disk", {"die-in-commit"}), dir));
  EXPECT_TRUE(reason.starts_with("update_succeeds: POST /commit_weight_update: no answer from 127.0.0.1:")) << reason;
  EXPECT_NE(reason.find("the server process exited with status 17"), std::string::npos) << reason;
}

TEST(HttpProfilerFaults, AnSglangServerDyingMidCommitNamesItsReloadEndpoint) {
  test::TempDir dir;
  const std::string reason = trial_reason(run(http_cell("disk", {"die-in-commit"}, "sglang"), dir));
  EXPECT_TRUE(reason.starts_with("update_succeeds: POST /update_weights_from_disk: no answer from 127.0.0.1:"))
      << reason;
  EXPECT_NE(reason.find("the server process exited with status 17"), std::string::npos) << reason;
}

TEST(HttpProfilerFaults, SlowHealthWithinTheTimeoutPasses) {
  test::TempDir dir;
  const json result = run(http_cell("cpu", {"slow-health=0.2"}), dir);
  EXPECT_EQ(result["status"], "pass") << result.dump(2);
}

TEST(HttpProfilerFaults, SlowHealthBeyondTheTimeoutFailsNamingHealth) {
  test::TempDir dir;
  MatrixCell cell = http_cell("cpu", {"slow-health=5"});
  cell.server_ready_timeout_s = 0.5;
  cell.server_stop_timeout_s = 0.5;  // its /health handler still sleeps: SIGKILL soon
  const std::string reason = trial_reason(run(cell, dir));
  EXPECT_TRUE(reason.starts_with("engine_answers: GET /health: the server did not become healthy within 0.5 s (last: "
                                 "no answer (Read)"))
      << reason;
}

TEST(HttpProfilerFaults, NeverHealthyFailsNamingHealthAndItsAnswer) {
  test::TempDir dir;
  MatrixCell cell = http_cell("cpu", {"never-healthy"});
  // Long enough for the server to boot and answer 503 even on a loaded 2-core CI machine (with 1 s it sometimes
  // had not started listening, and the last answer was "no answer").
  cell.server_ready_timeout_s = 5;
  EXPECT_EQ(trial_reason(run(cell, dir)),
            "engine_answers: GET /health: the server did not become healthy within 5 s (last: HTTP 503: "
            "{\"detail\":\"fault never-healthy\"})");
}

TEST(HttpProfilerFaults, HttpErrorStatusIsNamedWithTheFirstBytesOfTheBody) {
  test::TempDir dir;
  const std::string endpoint = make_protocol("sglang")->checksums()->endpoint();
  EXPECT_EQ(trial_reason(run(http_cell("disk", {"http-500:/weights_checker"}, "sglang"), dir)),
            fmt::format("engine_answers: {0}: HTTP 500: the server refused: '{0}: fault http-500 Internal Server "
                        "Error'",
                        endpoint));
}

TEST(HttpProfilerFaults, NonJsonBodyIsNamed) {
  test::TempDir dir;
  EXPECT_EQ(trial_reason(run(http_cell("disk", {"non-json:/generate"}, "sglang"), dir)),
            "engine_answers: POST /generate: HTTP 200: the answer is not JSON (Content-Type 'text/html'): "
            "'<html>fault non-json</html>'");
}

TEST(HttpProfilerFaults, WrongShapeIsNamedWithTheField) {
  test::TempDir dir;
  const std::string reason = trial_reason(run(http_cell("disk", {"wrong-shape:/model_info"}, "sglang"), dir));
  EXPECT_TRUE(reason.starts_with("engine_answers: GET /model_info: field 'weight_version' is missing")) << reason;
}

TEST(HttpProfilerFaults, ARefusedCommitIsAFailedUpdateWithTheServersMessage) {
  test::TempDir dir;
  const json result = run(http_cell("disk", {"refuse:/update_weights_from_disk"}, "sglang"), dir);
  EXPECT_EQ(trial_reason(result),
            "update_succeeds: POST /update_weights_from_disk: HTTP 400: the server refused: '{\"message\":\"POST "
            "/update_weights_from_disk: fault refuse\",\"success\":false}'");
  // The engine still serves v0 after the refused update: the missing-target attempt that follows is judged against
  // that state (it changed nothing), not against the target the update never reached.
  ASSERT_EQ(result["trials"].size(), 1u);
  for (const auto& check : result["trials"][0]["checks"]) {
    if (check["name"] != "missing_target_rejected") continue;
    EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
    EXPECT_TRUE(check["detail"].get<std::string>().starts_with("rejected (missing): version 001003 not published in "))
        << check.dump();
  }
}

TEST(HttpProfilerFaults, AMissingEndpointIsA404NamingIt) {
  test::TempDir dir;
  const std::string reason =
      trial_reason(run(http_cell("disk", {"http-404:/update_weights_from_disk"}, "sglang"), dir));
  EXPECT_EQ(reason,
            "update_succeeds: POST /update_weights_from_disk: HTTP 404: the server refused: "
            "'{\"detail\":\"Not Found\"}'");
}

TEST(HttpProfilerFaults, VersionGoingBackwardsIsNamed) {
  test::TempDir dir;
  EXPECT_EQ(trial_reason(run(http_cell("cpu", {"version-backwards"}), dir)),
            "probes_exact: error: POST /generate: weight_version went backwards: 000000 after 000001");
}

TEST(HttpProfilerFaults, ServerThatCannotStartFailsTheCellNamingHealth) {
  test::TempDir dir;
  MatrixCell cell = http_cell("cpu");
  cell.server_command = {"/bin/false"};
  const json result = run(cell, dir);
  EXPECT_EQ(result["status"], "fail");
  EXPECT_TRUE(result["reason"].get<std::string>().starts_with(
      "setup: reference engine (native load of 000001): GET /health: the server process exited with status 1 before "
      "it became healthy"))
      << result["reason"];
}

TEST(HttpMatrix, FailedServersFailTheirCellsTheMatrixGoesOnAndExitsNonZero) {
  test::TempDir dir;
  auto faulty = [](const std::string& fault) {
    EngineLaunch launch;
    launch.protocol = "stitch-staging";
    auto command = default_serve_command(launch);
    command.insert(command.end(), {"--fault", fault});
    return command;
  };
  const json matrix{
      {"name", "http-faults"},
      {"defaults", {{"model", "llama-tiny-bf16"}, {"tp", 2}, {"n", 1}, {"seed", 3}, {"engine", "http"},
                    {"floor_bytes", 1 << 20}, {"server_ready_timeout_s", 30}}},
      {"cells", {{{"id", "dies"}, {"mode", "cpu"}, {"server_command", faulty("die-in-commit")}},
                 {{"id", "never-healthy"}, {"mode", "disk"}, {"server_command", faulty("never-healthy")},
                  {"server_ready_timeout_s", 5}},  // booted and answering 503 even on a loaded machine
                 {{"id", "good"}, {"mode", "disk"}}}}};
  const fs::path matrix_path = dir / "m.json";
  std::ofstream(matrix_path) << matrix.dump(2);
  const fs::path out = dir / "out";
  const std::string command = fmt::format("'{}/wsbench' --profiles '{}' run '{}' --quiet --out '{}' > '{}.log' 2>&1",
                                          WSBENCH_BINARY_DIR, WSBENCH_PROFILES_DIR, matrix_path.string(), out.string(),
                                          out.string());
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const json results = json::parse(std::ifstream(out / "results.json"));
  ASSERT_EQ(results["cells"].size(), 3u);
  EXPECT_EQ(results["cells"][0]["status"], "fail");
  EXPECT_TRUE(results["cells"][0]["reason"].get<std::string>().starts_with(
      "trial 0: update_succeeds: POST /commit_weight_update: no answer from 127.0.0.1:"))
      << results["cells"][0]["reason"];
  EXPECT_EQ(results["cells"][1]["status"], "fail");
  EXPECT_EQ(results["cells"][1]["reason"],
            "trial 0: engine_answers: GET /health: the server did not become healthy within 5 s (last: HTTP 503: "
            "{\"detail\":\"fault never-healthy\"})");
  EXPECT_EQ(results["cells"][2]["status"], "pass") << results["cells"][2].dump(2);
  EXPECT_EQ(results["cells"][2]["engine"], "http");
}

}  // namespace
}  // namespace wsb
