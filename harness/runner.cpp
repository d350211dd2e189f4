#include "harness/runner.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include "engine/cuda/cuda_ops.hpp"
#include "harness/context.hpp"
#include "reports/results_json.hpp"
#include "harness/progress.hpp"
#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "modes/refit/rank_shards.hpp"
#include "modes/sync/rank_image.hpp"

extern char** environ;

namespace wsb {
namespace fs = std::filesystem;

fs::path self_executable() { return fs::read_symlink("/proc/self/exe"); }

std::vector<std::string> cell_command(const MatrixCell& cell, const Launcher& launcher, const fs::path& self,
                                      const RunOptions& options, const fs::path& cell_out, const fs::path& workdir) {
  std::vector<std::string> argv = {self.string(), "--profiles", fs::absolute(options.profiles_dir).string(),
                                   "cell",        "--matrix",   fs::absolute(options.matrix_path).string(),
                                   "--cell",      cell.id,      "--out",
                                   cell_out.string(), "--workdir", workdir.string()};
  if (options.keep_workdir) argv.push_back("--keep-workdir");
  // An http cell's process is the client: it runs natively and starts every server through the launcher itself.
  if (cell.uses_http()) return argv;
  argv = expand_launcher(launcher, argv, fs::absolute(options.out_dir).string(), self.string());
  // posix_spawn takes a path: a launcher program named without '/' is looked up on PATH here.
  if (const std::string program = resolve_launcher_program(launcher); !program.empty()) argv[0] = program;
  return argv;
}

std::string skip_reason(const MatrixCell& cell, const Launcher& launcher) {
  if (cell.uses_http() && !launcher.network) {
    return fmt::format("engine 'http' reaches its servers over loopback; runtime '{}' gives them no network ({})",
                       launcher.name, launcher.no_network_why);
  }
  if (!cell.uses_cuda() || launcher.gpu) return "";
  return fmt::format("engine '{}' needs a GPU; runtime '{}' gives the cell none ({})", cell.engine, launcher.name,
                     launcher.no_gpu_why);
}

namespace {

/// Runs argv, calling `tick` about every 100 ms until it ends; returns a description of an abnormal end ("" for
/// exit 0 or 1, the cell's own verdicts).
std::string spawn_and_wait(const std::vector<std::string>& argv, const std::function<void()>& tick) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) return fmt::format("cannot start {}: {}", argv[0], std::strerror(rc));
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return fmt::format("waitpid: {}", std::strerror(errno));
    tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (WIFSIGNALED(status)) return fmt::format("cell process killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 1) {
    return fmt::format("cell process exited with status {}", WEXITSTATUS(status));
  }
  return "";
}

}  // namespace

void check_device_fits(const MatrixCell& cell, const std::vector<RankLayout>& layouts) {
  const int devices = cuda_ops::visible_devices();
  if (devices == 0) {
    throw Error(ErrorKind::Resource,
                fmt::format("engine '{}' needs a CUDA device; none is visible here ({})", cell.engine,
                            cuda_ops::built() ? "driver reports no device" : "this wsbench was built without CUDA"));
  }
  // Device storages of the engine under test (the reference engine is gone before a trial boots). Slots' KV caches
  // and scratch come on top; the engine reports them itself when they do not fit.
  std::map<int, uint64_t> need;
  for (size_t r = 0; r < layouts.size(); ++r) {
    uint64_t bytes = 0;
    storage_offsets(layouts[r], &bytes);
    need[static_cast<int>(r) % devices] += bytes;
  }
  for (const auto& [device, bytes] : need) {
    uint64_t free_bytes = 0, total_bytes = 0;
    cuda_ops::memory_info(device, &free_bytes, &total_bytes);
    if (bytes > free_bytes) {
      throw Error(ErrorKind::Resource,
                  fmt::format("TP {} needs {} bytes of runtime storages on device {} ({}), {} free of {}", cell.tp,
                              bytes, device, cuda_ops::device_name(device), free_bytes, total_bytes));
    }
  }
}

void check_cells(const Matrix& matrix, const std::vector<MatrixCell>& cells, const fs::path& profiles_dir) {
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& cell = cells[i];
    try {
      const ModelProfile profile = cell_profile(cell, profiles_dir);
      const auto layouts = build_rank_layouts(profile, cell.tp);
      const Launcher& launcher = matrix.launcher_for(cell);
      if (!skip_reason(cell, launcher).empty()) continue;  // not started: needs neither its program nor a device
      resolve_launcher_program(launcher);
      if (cell.uses_cuda()) check_device_fits(cell, layouts);
      // An embedded refit never splits a weight across buckets: a bucket too small for the model would fail every
      // trial of the cell, so it is bad input, refused with the bucket that works. (An http cell's protocol sends an
      // oversized tensor in a bucket of its own.)
      if (cell.sync.mode == SyncModeKind::Refit && cell.engine != "http" && cell.sync.refit.bucket_bytes != 0) {
        refit::check_bucket_fits(cell.sync.refit.bucket_bytes,
                                 refit::plan_rank_shards(profile.canonical_tensors(), layouts));
      }
    } catch (const Error& e) {
      const bool keep = e.kind() == ErrorKind::Resource || e.kind() == ErrorKind::Missing;
      throw Error(keep ? e.kind() : ErrorKind::Format,
                  fmt::format("{}: cell '{}': {}", matrix.path.string(), cell.id, e.what()));
    }
  }
}

namespace {

/// A cell that ran no trial (skipped, or its process wrote no result): its configuration, status and reason.
Cell cell_without_trials(const MatrixCell& mc, Status status, const std::string& reason) {
  nlohmann::json j = mc.to_json();
  j["status"] = "fail";
  j["trials"] = nlohmann::json::array();
  Cell c = parse_cell(j, mc.id);
  c.status = status;
  c.reason = reason;
  return c;
}

/// The cell process's result file, or the reason it cannot be read (empty `failure` on success).
std::optional<Cell> read_cell_result(const fs::path& path, std::string& failure) {
  std::ifstream in(path);
  if (!in) {
    if (failure.empty()) failure = "the cell process wrote no result";
    return std::nullopt;
  }
  try {
    return parse_cell(nlohmann::json::parse(in), path.string());
  } catch (const std::exception& e) {  // not JSON, or not a cell of the results schema
    failure += fmt::format("{}unreadable cell result {}: {}", failure.empty() ? "" : "; ", path.string(), e.what());
    return std::nullopt;
  }
}

}  // namespace

Results run_matrix(const RunOptions& options, const fs::path& self) {
  Matrix matrix = load_matrix(options.matrix_path);
  auto cells = filter_cells(matrix.cells, options.filter);
  if (cells.empty()) {
    throw Error(ErrorKind::Format, fmt::format("--filter '{}' selects no cell of {}", options.filter,
                                               options.matrix_path.string()));
  }
  cells = shard_cells(cells, options.shard);  // may be empty: a job array can have more tasks than cells
  check_cells(matrix, cells, options.profiles_dir);  // a bad model/tp/scale/bucket fails here, before any child runs
  fs::create_directories(options.out_dir / "cells");
  Results results;
  results.context = collect_context();
  results.matrix = matrix.name;
  if (options.shard.count > 1) results.extra["shard"] = {{"index", options.shard.index}, {"count", options.shard.count}};
  ProgressDisplay display(options.progress, options.progress_out != nullptr ? *options.progress_out : std::cerr,
                          options.progress == ProgressStyle::Tty ? terminal_width(STDERR_FILENO) : 0);
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& cell = cells[i];
    const Launcher& launcher = matrix.launcher_for(cell);
    const fs::path cell_out = fs::absolute(options.out_dir / "cells" / fmt::format("{:03}.json", i));
    const fs::path workdir = fs::absolute(options.out_dir / "work" / fmt::format("{:03}", i));
    const fs::path progress_file = progress_path_for(cell_out);
    fs::remove(cell_out);
    fs::remove(progress_file);
    CellStatus shown{i + 1, cells.size(), cell.id, {}, 0, "", ""};
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    display.started(shown);
    Cell result;
    if (const std::string why = skip_reason(cell, launcher); !why.empty()) {
      result = cell_without_trials(cell, Status::Skipped, why);
      result.extra["runtime_detected"] = "not-started";
    } else {
      auto tick = [&] {
        if (auto p = read_progress(progress_file)) shown.progress = *p;
        shown.elapsed_s = elapsed();
        display.update(shown);
      };
      std::string failure = spawn_and_wait(cell_command(cell, launcher, self, options, cell_out, workdir), tick);
      std::optional<Cell> read = read_cell_result(cell_out, failure);
      result = read ? std::move(*read) : cell_without_trials(cell, Status::Fail, failure);
      if (!failure.empty()) {
        result.status = Status::Fail;
        result.reason = failure;
      }
      // The host is the machine, as in the context block: a launcher that gives the child its own hostname (a
      // container) must not turn one machine into a fleet. The child's own name is kept beside it.
      if (!result.host.empty() && result.host != results.context.host) result.extra["host_in_runtime"] = result.host;
    }
    result.host = results.context.host;
    std::error_code ec;
    fs::remove(progress_file, ec);
    shown.status = status_name(result.status);
    shown.reason = result.reason;
    shown.elapsed_s = elapsed();
    display.finished(shown);
    results.cells.push_back(std::move(result));
  }
  std::error_code ec;
  if (!options.keep_workdir) fs::remove(options.out_dir / "work", ec);  // only removes it when empty
  return results;
}

}  // namespace wsb
