#pragma once
// Runs a matrix: every cell in a fresh child process started through the cell's runtime launcher, results
// joined into results.json + report.md, tables printed.
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine_api/launcher.hpp"
#include "harness/matrix.hpp"
#include "harness/progress_display.hpp"
#include "harness/shard.hpp"
#include "reports/results.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

struct RunOptions {
  std::filesystem::path matrix_path;
  std::filesystem::path out_dir;       ///< results.json, report.md, cells/, work/
  std::filesystem::path profiles_dir;
  std::string filter;                  ///< regex over cell ids
  bool keep_workdir = false;
  Shard shard;                         ///< this host's share, taken after the filter
  ProgressStyle progress = ProgressStyle::Plain;
  std::ostream* progress_out = &std::cerr;
};

/// Argument vector that runs one cell in a child process (`wsbench cell ...`) through `launcher`, its program
/// resolved to a path (resolve_launcher_program). `self` is the wsbench executable. An http cell's process is the
/// client and is started directly; it starts its servers through the launcher (profiler.hpp).
std::vector<std::string> cell_command(const MatrixCell& cell, const Launcher& launcher, const std::filesystem::path& self,
                                      const RunOptions& options, const std::filesystem::path& cell_out,
                                      const std::filesystem::path& workdir);

/// Why `cell` cannot run under `launcher` and is reported "skipped" ("" when it can): a CUDA engine under a
/// launcher without GPU access.
std::string skip_reason(const MatrixCell& cell, const Launcher& launcher);

/// A CUDA cell's preflight: a CUDA device is visible and every device can hold the runtime storages of the TP ranks
/// placed on it (rank r on device r % devices). Throws Error(Resource) saying what was needed and what is there.
void check_device_fits(const MatrixCell& cell, const std::vector<RankLayout>& layouts);

/// Checks that every cell's profile exists and its scale and TP size fit, that the launcher of every cell that will
/// run finds its program, and that CUDA cells that will run find their device (check_device_fits; cells with a
/// skip_reason are not checked for devices), and that an embedded refit cell's bucket_bytes holds the largest weight
/// of every rank (refit::check_bucket_fits). Throws Error(Format) naming the matrix, the cell and the reason;
/// Error(Missing) for a launcher program that is not installed; Error(Resource) for a missing or too small device.
void check_cells(const Matrix& matrix, const std::vector<MatrixCell>& cells, const std::filesystem::path& profiles_dir);

/// Runs the matrix's cells selected by filter and shard (after check_cells); returns the run's results (context
/// block, every cell as its process wrote it, with the host set to this machine's). A child that dies, writes no
/// result or one that is not a cell of the results schema yields a failed cell with the reason; a cell with a
/// skip_reason is not started and reported Skipped. Progress goes to options.progress_out in options.progress's
/// style.
Results run_matrix(const RunOptions& options, const std::filesystem::path& self);

/// Path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

}  // namespace wsb
