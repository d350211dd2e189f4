#pragma once
// Writing plots into a folder: per plot STEM.dat and STEM.gp (plot_script.hpp), then STEM.svg by gnuplot.
#include <filesystem>
#include <string>
#include <vector>

#include "reports/plot_script.hpp"

namespace wsb {

struct PlotJob {
  std::string stem;  ///< file name without extension, unique in the folder (plot_file_stem)
  Plot plot;
};

/// What write_plots did.
struct PlotOutcome {
  bool gnuplot_found = false;
  std::vector<std::string> drawn;     ///< stems whose SVG gnuplot wrote, in job order
  std::vector<std::string> problems;  ///< one line per thing that went wrong ("gnuplot not found ...", "<stem>.gp: ...")
};

/// Creates `dir`, writes every job's STEM.dat and STEM.gp (always, so the plots can be drawn later where gnuplot is
/// installed), then, when `gnuplot` (a program name looked up on PATH, or a path) is found, runs it on each script in
/// `dir`. A missing gnuplot or a failing script is reported in `problems`, never thrown: the caller's tables still
/// get written. Throws std::runtime_error naming the file when a file cannot be written.
PlotOutcome write_plots(const std::filesystem::path& dir, const std::vector<PlotJob>& jobs, const std::string& gnuplot);

/// Writes `text` to `path` (truncating). Throws std::runtime_error naming the path on failure.
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace wsb
