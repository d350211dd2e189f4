#include <fmt/format.h>

#include <fstream>

#include "cli/commands.hpp"
#include "harness/matrix.hpp"
#include "harness/profiler.hpp"
#include "harness/progress.hpp"
#include "core/errors.hpp"
#include "reports/results_json.hpp"

namespace wsb {

int cmd_cell(const std::filesystem::path& matrix_path, const std::string& cell_id, const std::filesystem::path& out,
             const std::filesystem::path& workdir, const std::filesystem::path& profiles_dir, bool keep_workdir) {
  const Matrix matrix = load_matrix(matrix_path);
  const MatrixCell* cell = nullptr;
  for (const auto& c : matrix.cells) {
    if (c.id == cell_id) cell = &c;
  }
  if (cell == nullptr) {
    throw Error(ErrorKind::Missing, fmt::format("{}: no cell with id '{}'", matrix_path.string(), cell_id));
  }
  CellRunOptions options{profiles_dir, workdir, keep_workdir, progress_path_for(out)};
  options.launcher = matrix.launcher_for(*cell);
  const Cell result = run_cell(*cell, options);
  const auto tmp = out.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << nlohmann::json(result).dump(2) << "\n";
    if (!f) throw Error(ErrorKind::Io, fmt::format("cannot write {}", tmp));
  }
  std::filesystem::rename(tmp, out);
  return result.status == Status::Pass ? 0 : 1;
}

}  // namespace wsb
