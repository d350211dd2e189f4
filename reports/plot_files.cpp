#include "reports/plot_files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/gnuplot.hpp"

namespace wsb {
namespace fs = std::filesystem;

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  f << text;
  f.flush();
  if (!f) throw std::runtime_error(fmt::format("{}: write failed: {}", path.string(), std::strerror(errno)));
}

PlotOutcome write_plots(const fs::path& dir, const std::vector<PlotJob>& jobs, const std::string& gnuplot) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
  for (const PlotJob& job : jobs) {
    write_text_file(dir / (job.stem + ".dat"), plot_data(job.plot));
    write_text_file(dir / (job.stem + ".gp"), plot_script(job.plot, job.stem + ".dat", job.stem + ".svg"));
  }
  PlotOutcome out;
  if (jobs.empty()) return out;
  const auto program = find_program(gnuplot);
  out.gnuplot_found = program.has_value();
  if (!program) {
    out.problems.push_back(fmt::format("{} not found (install the Debian package gnuplot-nox): no plots drawn; the "
                                       "scripts are in {} (run gnuplot on each there)",
                                       gnuplot, dir.string()));
    return out;
  }
  for (const PlotJob& job : jobs) {
    fs::remove(dir / (job.stem + ".svg"), ec);
    const std::string why = run_gnuplot(*program, dir, job.stem + ".gp");
    if (why.empty() && fs::exists(dir / (job.stem + ".svg"), ec)) {
      out.drawn.push_back(job.stem);
    } else {
      out.problems.push_back(fmt::format("{}: {} failed: {}", (dir / (job.stem + ".gp")).string(), program->string(),
                                         why.empty() ? "wrote no SVG" : why));
    }
  }
  return out;
}

}  // namespace wsb
