// Matrix schema: defaults, axes, include, exclude, ids, filters, and errors naming the cell and the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "harness/matrix.hpp"
#include "tests/support/error_checks.hpp"
#include "reports/results_json.hpp"
#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb {
namespace {

std::string matrix_error(const nlohmann::json& j) {
  return test::error_message([&] { parse_matrix(j, "m.json"); }, ErrorKind::Format);
}

TEST(Matrix, DefaultsApplyAndIdsAreDerived) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"model": "llama-tiny-bf16", "tp": 2, "n": 3},
      "cells": [{"mode": "disk"}, {"mode": "cpu", "n": 1, "id": "custom"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 2u);
  EXPECT_EQ(m.cells[0].id, "llama-tiny-bf16/disk/native/tp2");
  EXPECT_EQ(m.cells[0].n, 3);
  EXPECT_EQ(m.cells[1].id, "custom");
  EXPECT_EQ(m.cells[1].n, 1);
  EXPECT_EQ(filter_cells(m.cells, "disk").size(), 1u);
  EXPECT_EQ(filter_cells(m.cells, "").size(), 2u);
}

TEST(Matrix, ErrorsNameCellAndField) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "tpp": 2}]})")),
            "m.json: cell 0: unknown field 'tpp'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "ram"}]})")),
            "m.json: cell 0: field 'mode': unknown mode 'ram' (disk, cpu, refit)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"id": "c", "model": "a", "mode": "cpu", "tp": "2"}]})")),
            "m.json: cell 0 (c): field 'tp' must be an integer, got \"2\"");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "tp": 1.7}]})")),
            "m.json: cell 0: field 'tp' must be an integer, got 1.7");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "seed": -1}]})")),
            "m.json: cell 0: field 'seed' must be >= 0, got -1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "publish_versions": 999999}]})")),
            "m.json: cell 0: field 'publish_versions' must be 1..100, got 999999");
  // Density 0 publishes identity deltas, a real case (an update that changes nothing), as `wsbench publish` allows.
  const Matrix identity =
      parse_matrix(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "density": 0}]})"), "m.json");
  EXPECT_EQ(identity.cells.at(0).density, 0.0);
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "density": -0.1}]})")),
            "m.json: cell 0: field 'density' must be in [0, 1] (0: identity deltas), got -0.1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "density": 1.5}]})")),
            "m.json: cell 0: field 'density' must be in [0, 1] (0: identity deltas), got 1.5");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "n": 0}]})")),
            "m.json: cell 0: field 'n' must be 1..1000, got 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "target": 4}]})")),
            "m.json: cell 0: field 'target' must be 1..publish_versions (3), got 4");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "target": 2, "updates": 3}]})")),
            "m.json: cell 0: field 'updates' must be 1..target (2): each update before the measured one advances one "
            "version, got 3");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "updates": 0}]})")),
            "m.json: cell 0: field 'updates' must be 1..target (1): each update before the measured one advances one "
            "version, got 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu"}, {"model": "a", "mode": "cpu"}]})")),
            "m.json: cell 1: duplicate cell id 'a/cpu/native/tp1'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": []})")),
            "m.json: field 'cells' must be a non-empty array");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"mode": "cpu"}]})")),
            "m.json: cell 0: field 'model' is required");
}

// A cell's sync options travel matrix -> results.json -> reports through the one record: every valid combination comes
// back equal, with the same label.
TEST(Matrix, SyncOptionsSurviveTheResultsFile) {
  int combinations = 0;
  for (const std::string& mode : sync_mode_names()) {
    for (const std::string& strategy : commit_strategy_names()) {
      for (const std::string& transport : refit_transport_names()) {
        for (const uint64_t bytes : {uint64_t{0}, uint64_t{1} << 20}) {
          MatrixCell cell;
          cell.model = "llama-tiny-bf16";
          cell.engine = "embedded-cuda";
          cell.sync.mode = parse_sync_mode(mode);
          if (cell.sync.mode == SyncModeKind::Cpu) {
            cell.sync.cpu = {parse_commit_strategy(strategy), strategy == "full" ? 0 : bytes};
          }
          if (cell.sync.mode == SyncModeKind::Refit) {
            cell.sync.refit = {parse_refit_transport(transport), bytes, transport == "cuda-ipc" ? 3 : 0};
          }
          cell.id = "c/" + cell.mode_label();
          nlohmann::json j = cell.to_json();
          j["status"] = "pass";
          j["trials"] = nlohmann::json::array();
          const Cell read = parse_cell(j, "cell");
          EXPECT_EQ(read.sync, cell.sync) << j.dump();
          EXPECT_EQ(read.mode_label(), cell.mode_label());
          nlohmann::json back;
          to_json(back, read);
          EXPECT_EQ(back["bucket_bytes"], j["bucket_bytes"]) << j.dump();
          ++combinations;
        }
      }
    }
  }
  EXPECT_EQ(combinations, 3 * 2 * 3 * 2);
}

TEST(Matrix, UpdatesPerTrialAreRecordedOnlyWhenMoreThanOne) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "cells": [
      {"model": "a", "mode": "disk", "publish_versions": 3, "target": 3, "updates": 2},
      {"model": "a", "mode": "cpu"}]})"),
                              "m.json");
  EXPECT_EQ(m.cells[0].updates, 2u);
  EXPECT_EQ(m.cells[0].to_json()["updates"], 2);
  EXPECT_EQ(m.cells[1].updates, 1u);
  EXPECT_FALSE(m.cells[1].to_json().contains("updates"));  // results of single-update cells are unchanged
}

TEST(Matrix, RefitFieldsAreValidatedAndNamedInTheId) {
  const auto m = parse_matrix(nlohmann::json::parse(
                                  R"({"name": "x", "cells": [{"model": "a", "mode": "refit", "bucket_bytes": 4096}]})"),
                              "m.json");
  EXPECT_EQ(m.cells[0].id, "a/refit+inproc/native/tp1");
  EXPECT_EQ(m.cells[0].to_json()["transport"], "inproc");
  EXPECT_EQ(m.cells[0].to_json()["bucket_bytes"], 4096);
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "refit", "transport": "pigeon"}]})")),
            "m.json: cell 0: field 'transport': unknown transport 'pigeon' (inproc, shm, cuda-ipc)");
  const auto ipc = parse_matrix(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "refit",
      "engine": "embedded-cuda", "transport": "cuda-ipc", "base_gpu_id": 2}]})"), "m.json");
  EXPECT_EQ(ipc.cells[0].id, "a/refit+cuda-ipc/native/tp1");
  EXPECT_EQ(ipc.cells[0].sync.refit.base_gpu_id, 2);
  EXPECT_EQ(ipc.cells[0].to_json()["base_gpu_id"], 2);
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "refit", "transport": "cuda-ipc"}]})")),
            "m.json: cell 0: transport 'cuda-ipc' needs engine 'embedded-cuda' (device memory to export), not "
            "'embedded-cpu'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "refit", "base_gpu_id": 1}]})")),
            "m.json: cell 0: field 'base_gpu_id' applies to transport cuda-ipc only (transport is 'inproc')");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "refit",
      "engine": "embedded-cuda", "transport": "cuda-ipc", "base_gpu_id": -1}]})")),
            "m.json: cell 0: field 'base_gpu_id' must be >= 0, got -1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "bucket_bytes": 4096}]})")),
            "m.json: cell 0: fields 'transport' and 'bucket_bytes' apply to mode refit only (mode is 'cpu')");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "refit", "engine": "http"}]})")),
            "m.json: cell 0: protocol 'stitch-staging' has no refit mode (it drives: disk, cpu)");
}

TEST(Matrix, ProtocolAndPauseModeAreValidatedAndNamedInTheId) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "engine": "http", "protocol": "tgi"}]})")),
            "m.json: cell 0: protocol 'tgi' is unknown (expected one of: sglang, stitch-v0.5.15, "
            "stitch-v0.5.15-host-runtime, stitch-v0.5.16, stitch-staging, vllm)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "disk",
      "engine": "http", "protocol": "vllm", "pause_mode": "retract"}]})")),
            "m.json: cell 0: protocol 'vllm' has no pause mode retract (it has: drain, in_place, abort)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "pause_mode": "sideways"}]})")),
            "m.json: cell 0: field 'pause_mode': unknown 'sideways' (drain, retract, in_place, abort)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "accept_mixed_responses": true}]})")),
            "m.json: cell 0: field 'accept_mixed_responses' needs pause_mode 'in_place' (no other pause mode mixes "
            "versions)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "disk", "protocol": "sglang"}]})")),
            "m.json: cell 0: fields 'server_command', 'store' and 'protocol' need engine 'http', not 'embedded-cpu'");
}

TEST(Matrix, TheSmokeMatrixLoads) {
  const auto m = load_matrix(std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices" / "smoke.json");
  // llama, glm, kimi, gpt-oss tiny presets x disk, cpu; llama and kimi cpu+device-delta; three refit cells; six
  // http cells over the real protocols; tiny llama x both under gvisor
  ASSERT_EQ(m.cells.size(), 21u);
  EXPECT_EQ(m.cells[0].sync.mode, SyncModeKind::Disk);
  EXPECT_EQ(m.cells[1].sync.mode, SyncModeKind::Cpu);
  EXPECT_EQ(m.cells[0].tp, 2);
  EXPECT_EQ(m.cells[0].n, 3);
  for (size_t i = 0; i < 13; ++i) EXPECT_EQ(m.cells[i].runtime, "native") << m.cells[i].id;
  EXPECT_EQ(m.cells[8].id, "llama-tiny-bf16/cpu+device-delta/native/tp2");
  EXPECT_EQ(m.cells[8].sync.cpu.commit_strategy, CommitStrategy::DeviceDelta);
  EXPECT_EQ(m.cells[9].id, "kimi-tiny-nvfp4/cpu+device-delta/native/tp2");
  EXPECT_EQ(m.cells[10].id, "llama-tiny-bf16/refit+inproc/native/tp2");
  EXPECT_EQ(m.cells[10].sync.refit.bucket_bytes, 131072u);
  EXPECT_EQ(m.cells[11].id, "kimi-tiny-nvfp4/refit+inproc/native/tp2");
  EXPECT_EQ(m.cells[12].id, "gpt-oss-tiny-mxfp4/refit+shm/native/tp2");
  const std::vector<std::string> http{"llama-tiny-bf16/disk@sglang/native/tp2",
                                      "llama-tiny-bf16/refit+inproc@sglang/native/tp2",
                                      "llama-tiny-bf16/disk@stitch-v0.5.16:drain/native/tp2",
                                      "llama-tiny-bf16/cpu@stitch-v0.5.16:in_place/native/tp2",
                                      "llama-tiny-bf16/disk@stitch-v0.5.15/native/tp2",
                                      "llama-tiny-bf16/disk@vllm/native/tp2"};
  for (size_t i = 0; i < http.size(); ++i) {
    EXPECT_EQ(m.cells[13 + i].id, http[i]);
    EXPECT_TRUE(m.cells[13 + i].uses_http());
  }
  EXPECT_EQ(m.cells[16].pause_mode, PauseMode::InPlace);
  EXPECT_TRUE(m.cells[16].accept_mixed_responses);
  EXPECT_EQ(m.cells[19].id, "llama-tiny-bf16/disk/gvisor/tp2");
  EXPECT_EQ(m.cells[20].id, "llama-tiny-bf16/cpu/gvisor/tp2");
  EXPECT_EQ(m.cells[20].n, 3);
  EXPECT_EQ(m.cells[20].engine, "embedded-cpu");
  EXPECT_EQ(filter_cells(m.cells, "gvisor").size(), 2u);
}

TEST(Matrix, RuntimesAreBuiltInOrTheMatrixsLaunchers) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"model": "a", "mode": "cpu"},
      "launchers": {"docker-runsc": {"command": ["docker", "run", "--rm", "--runtime=runsc", "-v", "{out}:{out}", "img",
                                                 "{cell}"], "gpu": true},
                    "plain": ["env", "{cell}"]},
      "cells": [{"runtime": "native"}, {"runtime": "gvisor"}, {"runtime": "docker-runsc"}, {"runtime": "plain"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 4u);
  EXPECT_EQ(m.cells[2].id, "a/cpu/docker-runsc/tp1");
  EXPECT_EQ(m.launcher_for(m.cells[0]).name, "native");
  EXPECT_TRUE(m.launcher_for(m.cells[0]).gpu);
  EXPECT_FALSE(m.launcher_for(m.cells[1]).gpu);
  EXPECT_TRUE(m.launcher_for(m.cells[2]).gpu);
  EXPECT_FALSE(m.launcher_for(m.cells[3]).gpu);  // "gpu" defaults to false
  EXPECT_EQ(m.launcher_for(m.cells[3]).command, (std::vector<std::string>{"env", "{cell}"}));
  MatrixCell other = m.cells[0];
  other.runtime = "kata";
  try {
    m.launcher_for(other);
    ADD_FAILURE() << "unknown runtime accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cell a/cpu/native/tp1: unknown runtime 'kata' (docker-runsc, gvisor, native, plain)");
  }
}

TEST(Matrix, RuntimeAndLauncherErrorsNameCellAndField) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "runtime": "runc"}]})")),
            "m.json: cell 0: field 'runtime': unknown runtime 'runc' (gvisor, native)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": ["docker", "{cell}"]},
      "cells": [{"id": "c", "model": "a", "mode": "cpu", "runtime": "e"}]})")),
            "m.json: cell 0 (c): field 'runtime': unknown runtime 'e' (d, gvisor, native)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": ["docker"], "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: field 'launchers' must be an object (name -> command template)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": ["docker", "run"]}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': the command must have exactly one element \"{cell}\" (the wsbench cell argv), has 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": ["{cell}", "{cell}"]}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': the command must have exactly one element \"{cell}\" (the wsbench cell argv), has 2");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": "docker {cell}"}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': the command must be a non-empty array of strings (one element \"{cell}\")");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": ["docker", 1, "{cell}"]}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': command elements must be strings, got 1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": {"command": ["docker", "{cell}"], "gpu": "yes"}}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': field 'gpu' must be true or false, got \"yes\"");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"d": {"cmd": ["{cell}"]}}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'd': unknown field 'cmd' (command, gpu, network)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launchers": {"gvisor": ["runsc", "do", "{cell}"]}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: launcher 'gvisor': is built in and cannot be redefined");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "launcher": {}, "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: unknown top-level field 'launcher'");
}

TEST(Matrix, CudaEngineFieldsAndScaleKnobs) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"engine": "embedded-cuda"},
      "cells": [{"model": "glm-4.5-air-fp8", "mode": "cpu", "layers": 2, "experts": 8, "chunk_bytes": 16777216,
                 "copy_streams": 4, "cupti": false},
                {"model": "llama-tiny-bf16", "mode": "disk", "engine": "embedded-cpu"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 2u);
  const MatrixCell& cuda = m.cells[0];
  EXPECT_TRUE(cuda.uses_cuda());
  EXPECT_EQ(cuda.chunk_bytes, 16777216u);
  EXPECT_EQ(cuda.copy_streams, 4);
  EXPECT_FALSE(cuda.cupti);
  EXPECT_EQ(cuda.scale().layers, 2);
  EXPECT_EQ(cuda.scale().experts, 8);
  EXPECT_EQ(cuda.to_json()["experts"], 8);
  EXPECT_EQ(cuda.to_json()["copy_streams"], 4);
  EXPECT_FALSE(m.cells[1].uses_cuda());
  EXPECT_FALSE(m.cells[1].scaled());
  EXPECT_FALSE(m.cells[1].to_json().contains("copy_streams"));  // CUDA knobs only where they mean something
}

TEST(Matrix, CudaFieldErrors) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "engine": "cuda"}]})")),
            "m.json: cell 0: field 'engine': unknown engine 'cuda'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "copy_streams": 0}]})")),
            "m.json: cell 0: field 'copy_streams' must be 1..16, got 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "chunk_bytes": 4096}]})")),
            "m.json: cell 0: field 'chunk_bytes' must be >= 1 MiB");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "cupti": 1}]})")),
            "m.json: cell 0: field 'cupti' must be true or false, got 1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "experts": 0}]})")),
            "m.json: cell 0: field 'experts' must be >= 1");
}

TEST(Matrix, HttpEngineFields) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"model": "a", "mode": "cpu"},
      "cells": [{"id": "fork", "engine": "http", "server_command": ["python3", "-m", "sglang.launch_server", "--port", "{port}"],
                 "server_ready_timeout_s": 600, "server_stop_timeout_s": 20, "store": "/nvme/store"},
                {"id": "serve", "engine": "http"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 2u);
  EXPECT_TRUE(m.cells[0].uses_http());
  EXPECT_EQ(m.cells[0].server_command.size(), 5u);
  EXPECT_EQ(m.cells[0].server_command[4], "{port}");
  EXPECT_EQ(m.cells[0].server_ready_timeout_s, 600.0);
  EXPECT_EQ(m.cells[0].server_stop_timeout_s, 20.0);
  EXPECT_EQ(m.cells[0].server_request_timeout_s, 300.0);
  EXPECT_EQ(m.cells[0].store, "/nvme/store");
  EXPECT_EQ(m.cells[0].to_json()["server_command"][2], "sglang.launch_server");
  EXPECT_TRUE(m.cells[1].server_command.empty());  // wsbench serve
  EXPECT_FALSE(m.cells[1].to_json().contains("server_command"));
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "server_command": ["x"]}]})")),
            "m.json: cell 0: fields 'server_command', 'store' and 'protocol' need engine 'http', not 'embedded-cpu'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "engine": "http", "server_command": []}]})")),
            "m.json: cell 0: field 'server_command' must be a non-empty array of strings");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(
                R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "engine": "http", "server_ready_timeout_s": 0}]})")),
            "m.json: cell 0: field 'server_ready_timeout_s' must be a number of seconds > 0, got 0");
}

TEST(Matrix, EveryShippedMatrixLoadsWithProfilesAndTpThatFit) {
  const auto dir = std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices";
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    names.push_back(entry.path().filename().string());
    SCOPED_TRACE(entry.path().string());
    const Matrix m = load_matrix(entry.path());
    EXPECT_FALSE(m.description.empty());
    for (const auto& cell : m.cells) {
      // The preflight of `run` minus the device: the profile exists and its scale and TP size shard.
      EXPECT_NO_THROW(build_rank_layouts(cell_profile(cell, WSBENCH_PROFILES_DIR), cell.tp)) << cell.id;
    }
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoints-cuda.json", "checkpoints.json", "disk-frames.json",
                                             "gpt-oss-bf16-cuda.json",
                                             "gpt-oss-bf16.json", "h200-cpu-prepare.json", "h200-prepare.json",
                                             "h200-x4-glm45-air.json", "h200.json", "nightly-b300.json",
                                             "nightly-h100.json", "pin-check.json",
                                             "serve-cuda.json", "smoke-cuda.json", "smoke.json"}));
}

TEST(Matrix, GptOssBf16MatricesCoverEveryModeOnBothBackends) {
  const auto dir = std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices";
  const Matrix cpu = load_matrix(dir / "gpt-oss-bf16.json");
  std::vector<std::string> ids;
  for (const auto& c : cpu.cells) {
    EXPECT_EQ(c.engine, "embedded-cpu") << c.id;
    ids.push_back(c.id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"gpt-oss-tiny-bf16/disk/native/tp2", "gpt-oss-tiny-bf16/cpu/native/tp2",
                                           "gpt-oss-tiny-bf16/cpu+device-delta/native/tp2",
                                           "gpt-oss-tiny-bf16/refit+inproc/native/tp2",
                                           "gpt-oss-tiny-bf16/refit+shm/native/tp2", "gpt-oss-tiny-bf16/cpu/native/tp4"}));
  const Matrix cuda = load_matrix(dir / "gpt-oss-bf16-cuda.json");
  ASSERT_EQ(cuda.cells.size(), cpu.cells.size() + 4);
  for (size_t i = 0; i < cpu.cells.size(); ++i) {
    EXPECT_EQ(cuda.cells[i].id, cpu.cells[i].id);
    EXPECT_EQ(cuda.cells[i].engine, "embedded-cuda") << cuda.cells[i].id;
  }
  EXPECT_EQ(cuda.cells[cpu.cells.size()].id, "gpt-oss-tiny-bf16/refit+cuda-ipc/native/tp2");
  EXPECT_EQ(cuda.cells.back().id, "refit/gpt-oss-120b-bf16/refit+inproc/native/tp2/L2E16");
}

TEST(Matrix, NightlyMatricesCoverBothModesAndRuntimes) {
  const auto dir = std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices";
  for (const char* name : {"nightly-h100.json", "nightly-b300.json"}) {
    SCOPED_TRACE(name);
    const Matrix m = load_matrix(dir / name);
    std::set<std::string> combos;
    for (const auto& c : m.cells) {
      EXPECT_EQ(c.engine, "embedded-cuda") << c.id;
      EXPECT_GE(c.n, 2) << c.id;
      combos.insert(c.model + " " + c.mode_label() + " " + c.runtime);
    }
    // every (model, mode) under both runtimes
    for (const auto& c : m.cells) {
      EXPECT_TRUE(combos.contains(c.model + " " + c.mode_label() + " native")) << c.id;
      EXPECT_TRUE(combos.contains(c.model + " " + c.mode_label() + " gvisor")) << c.id;
    }
    EXPECT_NE(m.description.find("skipped"), std::string::npos);
  }
}

TEST(Matrix, TheShippedMatricesLoad) {
  const auto dir = std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices";
  // smoke-cuda: smoke's native cells (included, gvisor excluded, engine axis) with the same ids, then the cuda-ipc cell.
  const auto smoke = load_matrix(dir / "smoke.json");
  const auto cuda = load_matrix(dir / "smoke-cuda.json");
  ASSERT_EQ(cuda.cells.size(), 14u);
  for (size_t i = 0; i < 13; ++i) {
    MatrixCell expected = smoke.cells[i];
    ASSERT_EQ(expected.runtime, "native");
    expected.engine = "embedded-cuda";  // chunk_bytes, copy_streams, cupti at their defaults
    EXPECT_EQ(cuda.cells[i].to_json(), expected.to_json()) << i;
  }
  EXPECT_EQ(cuda.cells[12].id, "gpt-oss-tiny-mxfp4/refit+shm/native/tp2");
  EXPECT_EQ(cuda.cells[12].to_json()["chunk_bytes"], 64u << 20);
  EXPECT_EQ(cuda.cells[12].to_json()["copy_streams"], 2);
  EXPECT_EQ(cuda.cells[12].to_json()["cupti"], true);
  EXPECT_EQ(cuda.cells[13].id, "gpt-oss-tiny-mxfp4/refit+cuda-ipc/native/tp2");
  EXPECT_EQ(cuda.cells[13].sync.refit.bucket_bytes, 0u);
  EXPECT_EQ(cuda.cells[13].n, 3);
  EXPECT_EQ(cuda.cells[13].seed, 7u);
  for (const auto& c : cuda.cells) EXPECT_TRUE(c.uses_cuda()) << c.id;
  const auto h200 = load_matrix(dir / "h200.json");
  ASSERT_EQ(h200.cells.size(), 24u);
  for (size_t i = 17; i < 22; ++i) {
    EXPECT_EQ(h200.cells[i].sync.mode, SyncModeKind::Refit) << h200.cells[i].id;
    EXPECT_EQ(name_of(h200.cells[i].sync.refit.transport), i < 20 ? "inproc" : "cuda-ipc") << h200.cells[i].id;
  }
  EXPECT_EQ(h200.cells[20].sync.refit.bucket_bytes, 1ull << 30);
  EXPECT_EQ(h200.cells[17].sync.refit.bucket_bytes, 1ull << 30);
  EXPECT_EQ(h200.cells[0].model, "llama-3.1-8b-bf16");
  EXPECT_FALSE(h200.cells[0].scaled());  // full size
  EXPECT_EQ(h200.cells[1].id, "llama-3.1-8b-bf16/cpu+device-delta/native/tp1");
  EXPECT_EQ(h200.cells[11].experts, 128);
  EXPECT_EQ(h200.cells[14].sync.cpu.commit_strategy, CommitStrategy::DeviceDelta);
  // The dense pair: everything moved, full copy against device-delta, same scale.
  EXPECT_EQ(h200.cells[15].density, 1.0);
  EXPECT_EQ(h200.cells[15].sync.cpu.commit_strategy, CommitStrategy::Full);
  EXPECT_EQ(h200.cells[16].density, 1.0);
  EXPECT_EQ(h200.cells[16].sync.cpu.commit_strategy, CommitStrategy::DeviceDelta);
  EXPECT_EQ(h200.cells[16].layers, h200.cells[15].layers);
  // Disk mode's steady state: an unmeasured v0 -> v1, then v1 -> v2 and the catch-up v1 -> v3, full size.
  for (size_t i = 22; i < 24; ++i) {
    EXPECT_EQ(h200.cells[i].sync.mode, SyncModeKind::Disk) << h200.cells[i].id;
    EXPECT_EQ(h200.cells[i].updates, 2u) << h200.cells[i].id;
    EXPECT_FALSE(h200.cells[i].scaled()) << h200.cells[i].id;
  }
  EXPECT_EQ(h200.cells[22].target, 2u);
  EXPECT_EQ(h200.cells[23].target, 3u);
  // The prepare floors in a few minutes: llama full size at TP 1, disk's first update and its steady-state catch-up,
  // the refit stream in process and over CUDA IPC.
  const auto prepare = load_matrix(dir / "h200-prepare.json");
  ASSERT_EQ(prepare.cells.size(), 4u);
  for (const auto& c : prepare.cells) {
    EXPECT_EQ(c.model, "llama-3.1-8b-bf16") << c.id;
    EXPECT_FALSE(c.scaled()) << c.id;
    EXPECT_EQ(c.tp, 1) << c.id;
    EXPECT_TRUE(c.uses_cuda()) << c.id;
  }
  EXPECT_EQ(prepare.cells[0].sync.mode, SyncModeKind::Disk);
  EXPECT_EQ(prepare.cells[0].updates, 1u);
  EXPECT_EQ(prepare.cells[0].target, 1u);
  EXPECT_EQ(prepare.cells[1].sync.mode, SyncModeKind::Disk);
  EXPECT_EQ(prepare.cells[1].updates, 2u);
  EXPECT_EQ(prepare.cells[1].target, 3u);
  EXPECT_EQ(prepare.cells[1].publish_versions, 3u);
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(prepare.cells[i].sync.mode, SyncModeKind::Refit) << prepare.cells[i].id;
    EXPECT_EQ(prepare.cells[i].sync.refit.bucket_bytes, 1ull << 30) << prepare.cells[i].id;
  }
  EXPECT_EQ(name_of(prepare.cells[2].sync.refit.transport), "inproc");
  EXPECT_EQ(name_of(prepare.cells[3].sync.refit.transport), "cuda-ipc");
  const auto x4 = load_matrix(dir / "h200-x4-glm45-air.json");  // full-size GLM at TP 4, one GPU per rank
  ASSERT_EQ(x4.cells.size(), 2u);
  for (const auto& c : x4.cells) {
    EXPECT_EQ(c.model, "glm-4.5-air-fp8") << c.id;
    EXPECT_FALSE(c.scaled()) << c.id;
    EXPECT_EQ(c.tp, 4) << c.id;
    EXPECT_EQ(c.n, 2) << c.id;
    EXPECT_TRUE(c.uses_cuda()) << c.id;
  }
  EXPECT_EQ(x4.cells[0].sync.mode, SyncModeKind::Cpu);
  EXPECT_EQ(x4.cells[1].sync.mode, SyncModeKind::Disk);
}


// A folder of matrix files for include tests, removed at the end of the test.
class MatrixFiles {
 public:
  MatrixFiles()
      : dir_(std::filesystem::temp_directory_path() /
             ("wsbench_matrix_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~MatrixFiles() { std::filesystem::remove_all(dir_); }
  MatrixFiles(const MatrixFiles&) = delete;
  MatrixFiles& operator=(const MatrixFiles&) = delete;

  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

std::vector<std::string> ids_of(const Matrix& m) {
  std::vector<std::string> ids;
  for (const auto& c : m.cells) ids.push_back(c.id);
  return ids;
}

std::string load_error(const std::filesystem::path& path) {
  try {
    load_matrix(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << path;
  return "";
}

TEST(MatrixAxes, ExpandInFieldNameOrderWithSuffixesForFieldsTheIdDoesNotName) {
  // Axes replace the defaults' tp; the second cell sets tp itself and keeps it (no expansion over tp).
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"model": "a", "mode": "cpu", "tp": 2},
      "axes": {"tp": [1, 2], "density": [0.25, 0.5], "encoding": ["overwrite"]},
      "cells": [{}, {"id": "c", "tp": 4}]})"),
                              "m.json");
  EXPECT_EQ(ids_of(m), (std::vector<std::string>{"a/cpu/native/tp1/0.25", "a/cpu/native/tp2/0.25",
                                                 "a/cpu/native/tp1/0.5", "a/cpu/native/tp2/0.5", "c/0.25", "c/0.5"}));
  const std::vector<int> tps{1, 2, 1, 2, 4, 4};
  const std::vector<double> densities{0.25, 0.25, 0.5, 0.5, 0.25, 0.5};
  for (size_t i = 0; i < m.cells.size(); ++i) {
    EXPECT_EQ(m.cells[i].tp, tps[i]) << i;
    EXPECT_EQ(m.cells[i].density, densities[i]) << i;
    EXPECT_EQ(m.cells[i].encoding, "overwrite") << i;  // one value: no suffix
  }
}

TEST(MatrixAxes, ExcludeDropsCombinationsBeforeTheyAreValidated) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x",
      "axes": {"engine": ["embedded-cpu", "embedded-cuda"], "transport": ["inproc", "cuda-ipc"]},
      "exclude": [{"engine": "embedded-cpu", "transport": "cuda-ipc"}],
      "cells": [{"model": "a", "mode": "refit", "bucket_bytes": 4096}]})"),
                              "m.json");
  // The mode label names the transport: only the engine gets a suffix.
  EXPECT_EQ(ids_of(m), (std::vector<std::string>{"a/refit+inproc/native/tp1/embedded-cpu",
                                                 "a/refit+inproc/native/tp1/embedded-cuda",
                                                 "a/refit+cuda-ipc/native/tp1/embedded-cuda"}));
  EXPECT_EQ(m.cells[2].sync.refit.bucket_bytes, 4096u);
}

TEST(MatrixAxes, IncludeComesFirstAndTakesTheAxesAndExcludes) {
  MatrixFiles files;
  files.write("base.json", R"({"name": "base", "defaults": {"model": "a", "mode": "cpu"},
      "launchers": {"d": ["env", "{cell}"]}, "axes": {"n": [1, 2]},
      "cells": [{}, {"mode": "disk", "runtime": "gvisor"}, {"mode": "disk", "runtime": "d"}]})");
  // This matrix's defaults (model b, mode refit) apply to its own cell only; its runtime axis skips the included
  // cells that set runtime themselves.
  const auto top = files.write("top.json", R"({"name": "top", "include": "base.json",
      "launchers": {"d": ["env", "{cell}"]}, "defaults": {"model": "b", "mode": "refit"},
      "axes": {"runtime": ["native", "gvisor"], "seed": [7]}, "exclude": [{"mode": "disk", "n": 2}],
      "cells": [{}]})");
  const auto m = load_matrix(top);
  EXPECT_EQ(m.name, "top");
  EXPECT_EQ(ids_of(m), (std::vector<std::string>{"a/cpu/native/tp1/1", "a/cpu/gvisor/tp1/1", "a/cpu/native/tp1/2",
                                                 "a/cpu/gvisor/tp1/2", "a/disk/gvisor/tp1/1", "a/disk/d/tp1/1",
                                                 "b/refit+inproc/native/tp1", "b/refit+inproc/gvisor/tp1"}));
  for (const auto& c : m.cells) EXPECT_EQ(c.seed, 7u) << c.id;
  EXPECT_EQ(m.cells[2].n, 2);
  EXPECT_EQ(m.cells[6].n, 1);
  EXPECT_EQ(m.launcher_for(m.cells[5]).command, (std::vector<std::string>{"env", "{cell}"}));
}

TEST(MatrixAxes, AxisErrorsNameTheMatrixAxesAndField) {
  const auto with_axes = [](const std::string& axes) {
    return matrix_error(nlohmann::json::parse(R"({"name": "x", "axes": )" + axes +
                                              R"(, "cells": [{"model": "a", "mode": "cpu"}]})"));
  };
  EXPECT_EQ(with_axes(R"({"tpp": [1]})"), "m.json: axes: unknown field 'tpp'");
  EXPECT_EQ(with_axes(R"({"tp": []})"), "m.json: axes: field 'tp' must be a non-empty array of values");
  EXPECT_EQ(with_axes(R"({"tp": 2})"), "m.json: axes: field 'tp' must be a non-empty array of values");
  EXPECT_EQ(with_axes(R"({"tp": [1, "2"]})"), "m.json: axes: field 'tp' must be an integer, got \"2\"");
  EXPECT_EQ(with_axes(R"({"tp": [0]})"), "m.json: axes: field 'tp' must be 1..64, got 0");
  EXPECT_EQ(with_axes(R"({"engine": ["cuda"]})"), "m.json: axes: field 'engine': unknown engine 'cuda'");
  EXPECT_EQ(with_axes(R"({"runtime": ["kata"]})"), "m.json: axes: field 'runtime': unknown runtime 'kata' (gvisor, native)");
  EXPECT_EQ(with_axes(R"({"id": ["a", "b"]})"), "m.json: axes: field 'id' cannot be an axis");
  EXPECT_EQ(with_axes(R"({"server_command": [["x"]]})"), "m.json: axes: field 'server_command' cannot be an axis");
  EXPECT_EQ(with_axes(R"([1])"), "m.json: field 'axes' must be an object (field -> array of values)");
  // Cross-field checks run on each expanded cell, named with its axis values.
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "axes": {"transport": ["cuda-ipc"]},
      "cells": [{"model": "a", "mode": "refit"}]})")),
            "m.json: cell 0 with transport=cuda-ipc: transport 'cuda-ipc' needs engine 'embedded-cuda' (device memory "
            "to export), not 'embedded-cpu'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "axes": {"runtime": ["native", "gvisor"]},
      "cells": [{"id": "c", "model": "a", "mode": "cpu"}]})")),
            "m.json: cell 0 (c) with runtime=gvisor: duplicate cell id 'c'");
}

TEST(MatrixAxes, ExcludeErrors) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "exclude": [{"runtime": "gvisor"}],
      "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: exclude 0 ({\"runtime\":\"gvisor\"}) drops no cell");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "exclude": [{"runtim": "gvisor"}],
      "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: exclude 0: unknown field 'runtim'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "exclude": {"runtime": "gvisor"},
      "cells": [{"model": "a", "mode": "cpu"}]})")),
            "m.json: field 'exclude' must be an array of partial cells");
}

TEST(MatrixAxes, IncludeErrors) {
  MatrixFiles files;
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "include": "nope.json"})")),
            "m.json: include 'nope.json': no matrix at nope.json");
  const auto in_dir = [&](const nlohmann::json& j) {
    try {
      parse_matrix(j, "m.json", files.dir());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(in_dir(nlohmann::json::parse(R"({"name": "x", "include": "nope.json"})")),
            "m.json: include 'nope.json': no matrix at " + (files.dir() / "nope.json").string());
  const auto a = files.write("a.json", R"({"name": "a", "include": "b.json", "cells": []})");
  const auto b = files.write("b.json", R"({"name": "b", "include": "a.json", "cells": []})");
  EXPECT_EQ(load_error(a), b.string() + ": include 'a.json': include cycle (a.json -> b.json -> a.json)");
  const auto self = files.write("self.json", R"({"name": "s", "include": "self.json"})");
  EXPECT_EQ(load_error(self), self.string() + ": include 'self.json': include cycle (self.json -> self.json)");
  const auto base = files.write("base.json", R"({"name": "base", "launchers": {"d": ["env", "{cell}"]},
      "cells": [{"model": "a", "mode": "cpu"}]})");
  EXPECT_EQ(in_dir(nlohmann::json::parse(R"({"name": "x", "include": "base.json",
      "launchers": {"d": {"command": ["env", "{cell}"], "gpu": true}}})")),
            "m.json: launcher 'd' is defined differently in " + base.string());
  EXPECT_EQ(in_dir(nlohmann::json::parse(R"({"name": "x", "include": "base.json",
      "launchers": {"d": {"command": ["env", "{cell}"]}}})")),
            "accepted");  // the same definition, written the long way
  EXPECT_EQ(in_dir(nlohmann::json::parse(R"({"name": "x", "include": 3})")),
            "m.json: field 'include' must be a string (a matrix path relative to this one)");
}

}  // namespace
}  // namespace wsb

namespace wsb {
namespace {

TEST(MatrixCheckpoint, PathsResolveAgainstTheMatrixFolderAndNameTheCell) {
  MatrixFiles files;
  std::filesystem::create_directories(files.dir() / "sub");
  files.write("sub/base.json", R"({"name": "base", "cells": [{"checkpoint": "ckpt/a", "mode": "cpu"}]})");
  const auto top = files.write("top.json", R"({"name": "top", "include": "sub/base.json",
      "defaults": {"model": "llama-tiny-bf16", "tp": 2},
      "cells": [{"checkpoint": "real/step0/", "checkpoints": ["real/step1", "/abs/step2"], "mode": "disk",
                 "encoding": "auto", "target": 2},
                {"mode": "refit"}]})");
  const auto m = load_matrix(top);
  ASSERT_EQ(m.cells.size(), 3u);
  const std::string dir = std::filesystem::absolute(files.dir()).lexically_normal().string();
  // The included cell's path is its own matrix's folder's.
  EXPECT_EQ(m.cells[0].checkpoint, dir + "/sub/ckpt/a");
  EXPECT_EQ(m.cells[0].model, "hf:a");
  EXPECT_EQ(m.cells[0].id, "hf:a/cpu/native/tp1");
  EXPECT_TRUE(m.cells[0].checkpoints.empty());
  EXPECT_EQ(m.cells[0].publish_versions, 3u);
  // The checkpoint replaces the default model; `checkpoints` sets publish_versions.
  EXPECT_EQ(m.cells[1].checkpoint, dir + "/real/step0");
  EXPECT_EQ(m.cells[1].model, "hf:step0..step2");
  EXPECT_EQ(m.cells[1].id, "hf:step0..step2/disk/native/tp2");
  EXPECT_EQ(m.cells[1].checkpoints, (std::vector<std::string>{dir + "/real/step1", "/abs/step2"}));
  EXPECT_EQ(m.cells[1].publish_versions, 2u);
  EXPECT_EQ(m.cells[1].encoding, "auto");
  const auto j = m.cells[1].to_json();
  EXPECT_EQ(j["checkpoint"], dir + "/real/step0");
  EXPECT_EQ(j["checkpoints"], nlohmann::json::array({dir + "/real/step1", "/abs/step2"}));
  EXPECT_EQ(j["model"], "hf:step0..step2");
  EXPECT_FALSE(m.cells[2].on_checkpoint());
  EXPECT_FALSE(m.cells[2].to_json().contains("checkpoint"));
  EXPECT_EQ(m.cells[2].id, "llama-tiny-bf16/refit+inproc/native/tp2");
  // The model id is the one profile_from_hf_dir gives the directory's profile.
  const auto fixture = std::filesystem::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";
  EXPECT_EQ(checkpoint_model_id(fixture), profile_from_hf_dir(fixture).id);
  EXPECT_EQ(checkpoint_model_id(fixture.string() + "/"), "hf:hf-llama-tiny");
  EXPECT_EQ(checkpoint_model_id(fixture, {"/x/step1", "/x/step2/"}), "hf:hf-llama-tiny..step2");
  MatrixCell cell;
  cell.checkpoint = fixture.string();
  cell.model = checkpoint_model_id(fixture);
  cell.layers = 2;
  EXPECT_EQ(cell_profile(cell, WSBENCH_PROFILES_DIR).id, "hf:hf-llama-tiny@layers=2");
  EXPECT_EQ(cell_profile(cell, WSBENCH_PROFILES_DIR).dims.layers, 2);
}

TEST(MatrixCheckpoint, AnAxisOverCheckpointsNamesEachCellByItsModel) {
  MatrixFiles files;
  const auto path = files.write("m.json", R"({"name": "x", "axes": {"checkpoint": ["a/one", "b/two"]},
      "cells": [{"mode": "cpu"}]})");
  const auto m = load_matrix(path);
  ASSERT_EQ(m.cells.size(), 2u);
  EXPECT_EQ(m.cells[0].id, "hf:one/cpu/native/tp1");
  EXPECT_EQ(m.cells[1].id, "hf:two/cpu/native/tp1");
}

TEST(MatrixCheckpoint, CheckpointsFromDefaultsOrAxesNameTheModelToo) {
  MatrixFiles files;
  const auto path = files.write("m.json", R"({"name": "x", "defaults": {"checkpoints": ["s1"]},
      "axes": {"checkpoints": [["s1"], ["s1", "s2"]]},
      "cells": [{"checkpoint": "s0", "mode": "cpu"}, {"checkpoint": "s0", "checkpoints": ["t1"], "mode": "disk"}]})");
  const auto m = load_matrix(path);
  std::vector<std::string> ids;
  for (const auto& c : m.cells) ids.push_back(c.id + " " + std::to_string(c.publish_versions));
  EXPECT_EQ(ids, (std::vector<std::string>{"hf:s0..s1/cpu/native/tp1/[\"s1\"] 1",
                                           "hf:s0..s2/cpu/native/tp1/[\"s1\",\"s2\"] 2",
                                           "hf:s0..t1/disk/native/tp1 1"}));
}

TEST(MatrixCheckpoint, TheShippedCheckpointMatricesNameTheFixtures) {
  const auto dir = std::filesystem::path(WSBENCH_PROFILES_DIR) / ".." / ".." / "matrices";
  const auto cpu = load_matrix(dir / "checkpoints.json");
  const auto cuda = load_matrix(dir / "checkpoints-cuda.json");
  ASSERT_EQ(cuda.cells.size(), cpu.cells.size());
  const auto fixtures = std::filesystem::weakly_canonical(std::filesystem::path(WSBENCH_FIXTURES_DIR));
  for (size_t i = 0; i < cpu.cells.size(); ++i) {
    SCOPED_TRACE(cpu.cells[i].id);
    EXPECT_EQ(cpu.cells[i].engine, "embedded-cpu");
    EXPECT_TRUE(cpu.cells[i].on_checkpoint());
    EXPECT_EQ(std::filesystem::weakly_canonical(cpu.cells[i].checkpoint).parent_path(), fixtures);
    for (const auto& next : cpu.cells[i].checkpoints) {
      EXPECT_TRUE(std::filesystem::is_directory(next)) << next;
    }
    MatrixCell expected = cpu.cells[i];
    expected.engine = "embedded-cuda";
    EXPECT_EQ(cuda.cells[i].to_json(), expected.to_json());
  }
  std::set<std::string> modes;
  for (const auto& c : cpu.cells) modes.insert(c.mode_label());
  EXPECT_EQ(modes, (std::set<std::string>{"cpu", "disk", "refit+inproc"}));
}

TEST(MatrixCheckpoint, ErrorsNameTheCellAndTheField) {
  const auto cell_error = [](const std::string& cell) {
    return matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [)" + cell + "]}"));
  };
  EXPECT_EQ(cell_error(R"({"model": "a", "checkpoint": "/c", "mode": "cpu"})"),
            "m.json: cell 0: fields 'model' and 'checkpoint' exclude each other (a checkpoint's config.json is its "
            "model)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "", "mode": "cpu"})"),
            "m.json: cell 0: field 'checkpoint' must be a checkpoint directory (a non-empty string), got \"\"");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": [], "mode": "cpu"})"),
            "m.json: cell 0: field 'checkpoints' must be a non-empty array of checkpoint directories");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d", 3], "mode": "cpu"})"),
            "m.json: cell 0: field 'checkpoints' must be a checkpoint directory (a non-empty string), got 3");
  EXPECT_EQ(cell_error(R"({"model": "a", "checkpoints": ["/d"], "mode": "cpu"})"),
            "m.json: cell 0: field 'checkpoints' needs field 'checkpoint' (the FULL v0 they follow)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "publish_versions": 3, "mode": "cpu"})"),
            "m.json: cell 0: field 'publish_versions' (3) must equal the number of 'checkpoints' (1): one DELTA each");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "target": 2, "mode": "cpu"})"),
            "m.json: cell 0: field 'target' must be 1..publish_versions (1), got 2");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "density": 0.1, "mode": "cpu"})"),
            "m.json: cell 0: field 'density' has no meaning with field 'checkpoints' (the checkpoints are the deltas)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "frame_bytes": 4096, "mode": "cpu"})"),
            "m.json: cell 0: field 'frame_bytes' needs synthetic versions (checkpoint publications write one zstd "
            "frame per payload)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "checksum_range_bytes": 1048576, "mode": "cpu"})"),
            "m.json: cell 0: field 'checksum_range_bytes' needs synthetic versions (checkpoint publications write one "
            "xxh3-128 per tensor)");
  EXPECT_EQ(cell_error(R"({"model": "a", "checksum_range_bytes": 65536, "mode": "cpu"})"),
            "m.json: cell 0: field 'checksum_range_bytes' must be 0 (one xxh3-128 per tensor) or a multiple of 1 MiB "
            "(1048576), got 65536");
  EXPECT_EQ(cell_error(R"({"model": "a", "frame_bytes": 1000, "mode": "cpu"})"),
            "m.json: cell 0: field 'frame_bytes' must be 0 (one zstd frame per payload) or a multiple of 4096, got "
            "1000");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "checkpoints": ["/d"], "layers": 1, "mode": "cpu"})"),
            "m.json: cell 0: fields 'layers' and 'experts' cannot scale field 'checkpoints' (every tensor of a real "
            "delta is published)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "encoding": "auto", "mode": "cpu"})"),
            "m.json: cell 0: field 'encoding': 'auto' needs field 'checkpoints' (synthetic versions are published in "
            "one encoding)");
  EXPECT_EQ(cell_error(R"({"model": "a", "encoding": "auto", "mode": "cpu"})"),
            "m.json: cell 0: field 'encoding': 'auto' needs field 'checkpoints' (synthetic versions are published in "
            "one encoding)");
  EXPECT_EQ(cell_error(R"({"checkpoint": "/c", "engine": "http", "mode": "disk"})"),
            "m.json: cell 0: field 'checkpoint' needs an embedded engine (embedded-cpu or embedded-cuda): the servers "
            "of engine 'http' take a profile id");
  // A model axis over a checkpoint cell contradicts it.
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "axes": {"model": ["b"]},
      "cells": [{"checkpoint": "/c", "mode": "cpu"}]})")),
            "m.json: cell 0 with model=b: field 'model' ('b') contradicts field 'checkpoint' /c (whose model is 'hf:c')");
}

}  // namespace
}  // namespace wsb
