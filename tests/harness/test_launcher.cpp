// Runtime launchers: built-in commands, user templates, missing programs, GPU cells skipped under gVisor.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "harness/context.hpp"
#include "engine_api/launcher.hpp"
#include "harness/profiler.hpp"
#include "reports/results_json.hpp"
#include "harness/runner.hpp"
#include "core/errors.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

const std::vector<std::string> kCellArgv{"/bin/wsbench", "cell", "--cell", "x"};

/// Sets $PATH for the scope of one test.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) : old_(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST(Launcher, BuiltInsExpandToDirectExecAndRunscDo) {
  const auto& builtins = builtin_launchers();
  EXPECT_EQ(expand_launcher(builtins.at("native"), kCellArgv, "/o", "/bin/wsbench"), kCellArgv);
  EXPECT_EQ(expand_launcher(builtins.at("gvisor"), kCellArgv, "/o", "/bin/wsbench"),
            (std::vector<std::string>{"runsc", "--network=none", "do", "-force-overlay=false", "/bin/wsbench", "cell",
                                      "--cell", "x"}));
  EXPECT_TRUE(builtins.at("native").gpu);
  EXPECT_FALSE(builtins.at("gvisor").gpu);
}

TEST(Launcher, UserTemplateSplicesTheCellAndSubstitutesOutAndSelf) {
  const Launcher l = parse_launcher(
      "docker", nlohmann::json::parse(R"(["docker", "run", "-v", "{out}:{out}", "-v", "{self}:/w", "img", "{cell}", "--x"])"),
      "m.json");
  EXPECT_FALSE(l.gpu);
  EXPECT_EQ(expand_launcher(l, kCellArgv, "/res", "/bin/wsbench"),
            (std::vector<std::string>{"docker", "run", "-v", "/res:/res", "-v", "/bin/wsbench:/w", "img", "/bin/wsbench",
                                      "cell", "--cell", "x", "--x"}));
}

TEST(Launcher, MissingProgramNamesTheLauncherAndWhatToInstall) {
  test::TempDir empty;
  ScopedPath path(empty.path().string());
  EXPECT_EQ(test::error_message([&] { resolve_launcher_program(builtin_launchers().at("gvisor")); }, ErrorKind::Missing),
                 "runtime 'gvisor' needs 'runsc', which is not on PATH: install gVisor's runsc (Debian package 'runsc': "
                 "apt-get install runsc, or scripts/install-deps.sh), run as root");
  const Launcher l = parse_launcher("mine", nlohmann::json::parse(R"(["/no/such/launcher", "{cell}"])"), "m.json");
  try {
    resolve_launcher_program(l);
    FAIL() << "a missing absolute program was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "runtime 'mine' needs '/no/such/launcher', which is missing or not executable: install the "
                           "program of launcher 'mine'");
  }
  EXPECT_EQ(resolve_launcher_program(builtin_launchers().at("native")), "");  // direct exec needs nothing
}

TEST(Launcher, ProgramIsFoundOnPath) {
  test::TempDir dir;
  const auto runsc = dir / "runsc";
  std::ofstream(runsc) << "#!/bin/sh\n";
  std::filesystem::permissions(runsc, std::filesystem::perms::owner_all);
  ScopedPath path("/nonexistent:" + dir.path().string());
  EXPECT_EQ(resolve_launcher_program(builtin_launchers().at("gvisor")), runsc.string());
}

TEST(Launcher, GpuCellsAreSkippedUnderLaunchersWithoutGpu) {
  MatrixCell cuda;
  cuda.engine = "embedded-cuda";
  MatrixCell cpu;
  EXPECT_EQ(skip_reason(cuda, builtin_launchers().at("gvisor")),
            "engine 'embedded-cuda' needs a GPU; runtime 'gvisor' gives the cell none (runsc has no GPU proxy here: CUDA "
            "is not reachable inside the gVisor sandbox)");
  EXPECT_EQ(skip_reason(cuda, builtin_launchers().at("native")), "");
  EXPECT_EQ(skip_reason(cpu, builtin_launchers().at("gvisor")), "");
  const Launcher plain = parse_launcher("plain", nlohmann::json::parse(R"(["env", "{cell}"])"), "m.json");
  EXPECT_EQ(skip_reason(cuda, plain),
            "engine 'embedded-cuda' needs a GPU; runtime 'plain' gives the cell none (launcher 'plain' does not declare "
            "GPU access (\"gpu\": true))");
  const Launcher gpu =
      parse_launcher("g", nlohmann::json::parse(R"({"command": ["env", "{cell}"], "gpu": true})"), "m.json");
  EXPECT_EQ(skip_reason(cuda, gpu), "");
}

TEST(Launcher, HttpCellsAreSkippedUnderLaunchersWithoutNetwork) {
  MatrixCell http;
  http.engine = "http";
  EXPECT_EQ(skip_reason(http, builtin_launchers().at("gvisor")),
            "engine 'http' reaches its servers over loopback; runtime 'gvisor' gives them no network (runsc "
            "--network=none: a server inside the sandbox has no network the harness can reach)");
  EXPECT_EQ(skip_reason(http, builtin_launchers().at("native")), "");
  const Launcher closed =
      parse_launcher("c", nlohmann::json::parse(R"({"command": ["env", "{cell}"], "network": false})"), "m.json");
  EXPECT_EQ(skip_reason(http, closed), "engine 'http' reaches its servers over loopback; runtime 'c' gives them no "
                                       "network (launcher 'c' declares no network (\"network\": false))");
  const Launcher open = parse_launcher("o", nlohmann::json::parse(R"(["env", "{cell}"])"), "m.json");
  EXPECT_EQ(skip_reason(http, open), "");  // "network" defaults to true
  EXPECT_THROW(parse_launcher("x", nlohmann::json::parse(R"({"command": ["env", "{cell}"], "network": 1})"), "m.json"),
               Error);
}

TEST(Launcher, CellCommandRunsTheCellThroughTheLauncher) {
  Matrix m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "launchers": {"e": ["env", "A=1", "{cell}"]},
      "cells": [{"model": "llama-tiny-bf16", "mode": "cpu", "runtime": "e"}]})"),
                          "m.json");
  RunOptions options;
  options.matrix_path = "/m/x.json";
  options.profiles_dir = "/p";
  options.out_dir = "/o";
  const auto argv = cell_command(m.cells[0], m.launcher_for(m.cells[0]), "/bin/wsbench", options, "/o/cells/000.json",
                                 "/o/work/000");
  EXPECT_EQ(argv, (std::vector<std::string>{resolve_launcher_program(m.launcher_for(m.cells[0])), "A=1", "/bin/wsbench",
                                            "--profiles", "/p", "cell", "--matrix", "/m/x.json", "--cell",
                                            "llama-tiny-bf16/cpu/e/tp1", "--out", "/o/cells/000.json", "--workdir",
                                            "/o/work/000"}));
  EXPECT_EQ(argv[0].substr(argv[0].size() - 4), "/env");
}

TEST(Launcher, GpuCellUnderGvisorIsReportedSkippedWithoutStarting) {
  test::TempDir dir;
  const auto matrix = dir / "m.json";
  std::ofstream(matrix) << R"({"name": "x", "cells": [{"model": "llama-tiny-bf16", "mode": "cpu", "tp": 2,
      "engine": "embedded-cuda", "runtime": "gvisor"}]})";
  RunOptions options;
  options.matrix_path = matrix;
  options.out_dir = dir / "out";
  options.profiles_dir = WSBENCH_PROFILES_DIR;
  options.progress = ProgressStyle::Quiet;
  // Neither a device nor runsc nor a wsbench executable is needed: the cell is never started.
  test::TempDir empty;
  ScopedPath path(empty.path().string());
  const nlohmann::json results = run_matrix(options, "/no/such/wsbench");
  ASSERT_EQ(results["cells"].size(), 1u);
  const auto& cell = results["cells"][0];
  EXPECT_EQ(cell["id"], "llama-tiny-bf16/cpu/gvisor/tp2");
  EXPECT_EQ(cell["status"], "skipped");
  EXPECT_EQ(cell["reason"],
            "engine 'embedded-cuda' needs a GPU; runtime 'gvisor' gives the cell none (runsc has no GPU proxy here: CUDA "
            "is not reachable inside the gVisor sandbox)");
  EXPECT_EQ(cell["runtime"], "gvisor");
  EXPECT_EQ(cell["runtime_detected"], "not-started");
  EXPECT_TRUE(cell["trials"].empty());
}

TEST(Launcher, MissingRunscIsASetupErrorBeforeAnyCell) {
  test::TempDir dir;
  const auto matrix = dir / "m.json";
  std::ofstream(matrix) << R"({"name": "x", "cells": [{"model": "llama-tiny-bf16", "mode": "cpu", "runtime": "gvisor"}]})";
  RunOptions options;
  options.matrix_path = matrix;
  options.out_dir = dir / "out";
  options.profiles_dir = WSBENCH_PROFILES_DIR;
  options.progress = ProgressStyle::Quiet;
  test::TempDir empty;
  ScopedPath path(empty.path().string());
  EXPECT_EQ(test::error_message([&] { run_matrix(options, "/no/such/wsbench"); }, ErrorKind::Missing),
              matrix.string() +
                  ": cell 'llama-tiny-bf16/cpu/gvisor/tp1': runtime 'gvisor' needs 'runsc', which is not on PATH: install "
                  "gVisor's runsc (Debian package 'runsc': apt-get install runsc, or scripts/install-deps.sh), run as "
                  "root");
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "cells"));
}

TEST(Launcher, AGvisorCellOutsideTheSandboxFails) {
  if (detect_host_runtime() == "gvisor") GTEST_SKIP() << "this test runs inside gVisor";
  test::TempDir dir;
  MatrixCell cell;
  cell.id = "c";
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of("cpu");
  cell.runtime = "gvisor";
  const nlohmann::json result = run_cell(cell, CellRunOptions{WSBENCH_PROFILES_DIR, dir / "work", false, {}});
  EXPECT_EQ(result["status"], "fail");
  EXPECT_EQ(result["runtime"], "gvisor");
  EXPECT_EQ(result["runtime_detected"], detect_host_runtime());
  EXPECT_EQ(result["reason"], "setup: runtime 'gvisor' but the cell process runs on '" + detect_host_runtime() +
                                  "' (no gVisor sandbox)");
  EXPECT_TRUE(result["trials"].empty());
}

}  // namespace
}  // namespace wsb
