#pragma once
// Runs a matrix: every cell in a fresh child process started through the cell's runtime launcher, results
// joined into results.json + report.md, tables printed.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/matrix.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

struct RunOptions {
  std::filesystem::path matrix_path;
  std::filesystem::path out_dir;       ///< results.json, report.md, cells/, work/
  std::filesystem::path profiles_dir;
  std::string filter;                  ///< regex over cell ids
  bool keep_workdir = false;
};

/// Argument vector that runs one cell in a child process (`wsbench cell ...`) under the cell's runtime.
/// `self` is the wsbench executable. Throws Error(Format) for an unknown runtime.
std::vector<std::string> cell_command(const MatrixCell& cell, const std::filesystem::path& self, const RunOptions& options,
                                      const std::filesystem::path& cell_out, const std::filesystem::path& workdir);

/// A CUDA cell's preflight: a CUDA device is visible and every device can hold the runtime storages of the TP ranks
/// placed on it (rank r on device r % devices). Throws Error(Resource) saying what was needed and what is there.
void check_device_fits(const MatrixCell& cell, const std::vector<RankLayout>& layouts);

/// Checks that every cell's profile exists and its scale and TP size fit, and that CUDA cells find their device
/// (check_device_fits). Throws Error(Format) naming the matrix, the cell and the reason; Error(Resource) for a
/// missing or too small device.
void check_cells(const Matrix& matrix, const std::vector<MatrixCell>& cells, const std::filesystem::path& profiles_dir);

/// Runs the matrix (after check_cells); returns results.json's object. A child that dies or writes no result yields a failed cell
/// with the exit status as reason.
nlohmann::json run_matrix(const RunOptions& options, const std::filesystem::path& self);

/// Path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

}  // namespace wsb
