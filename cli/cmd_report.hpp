#pragma once
// `wsbench report` and its subcommands: table, merge, compare, trace. Every input is parsed and every output
// rendered before anything is written, so bad input (another schema_version, malformed JSON, a missing field)
// throws std::runtime_error naming the file and field (main prints it, exit 2) and leaves no output behind.
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace wsb {

/// Where plots go and which gnuplot draws them (reports/plot_files.hpp).
struct PlotArgs {
  std::filesystem::path dir;     ///< empty: no plots
  std::string gnuplot = "gnuplot";  ///< program name on PATH or a path
};

/// Tables of one results file or several merged. `format`: text | markdown | json | csv (reports/report_tables.hpp);
/// `out` empty or "-": stdout. `markdown_out`: also write report.md there (the old `report --markdown`). With
/// `plots.dir`, also the pause and loop plots per cell (reports/cell_plots.hpp) there; a missing gnuplot is said on
/// `stderr_` and the tables are still written. Returns 1 when any cell failed, else 0.
int report_table(const std::vector<std::filesystem::path>& inputs, const std::string& format,
                 const std::filesystem::path& out, const std::filesystem::path& markdown_out, std::ostream& stdout_,
                 const PlotArgs& plots = {}, std::ostream* stderr_ = nullptr);

/// Nightly history (reports/history.hpp) of `inputs`, one point per file: `out_dir`/history.md and one plot per
/// configuration and metric. `metrics`: comma-separated history_metric_names; `max_regression` as for compare.
/// A missing gnuplot is said on `stderr_` and history.md is still written (without images). Prints one line per
/// regression of a series' newest point and a summary line on `stdout_`. Returns 1 when the newest point of any
/// series regressed, else 0; bad input throws std::runtime_error before anything is written (exit 2).
int report_history(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out_dir,
                   const std::string& metrics, const std::string& max_regression, const std::string& gnuplot,
                   std::ostream& stdout_, std::ostream& stderr_);

/// Merges results of many hosts into one fleet results file at `out` (reports/merge.hpp; readable by report
/// table). Prints hosts and cells counted. Returns 0.
int report_merge(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                 std::ostream& stdout_);

/// "10%" -> 0.10, "0.1" -> 0.1. Throws std::runtime_error for anything else or a negative value.
double parse_regression_threshold(const std::string& text);

/// Baseline vs candidate (reports/compare.hpp): the comparison table in `format` to `out` (empty or "-": stdout),
/// then failed candidate checks. Returns 1 when any metric of any cell regressed beyond `max_regression` or any
/// cell of the candidate failed (cell_verdict), else 0. Results of different configurations
/// (configuration_mismatch) throw std::runtime_error "configurations differ: ..." (exit 2).
int report_compare(const std::filesystem::path& baseline, const std::filesystem::path& candidate,
                   const std::string& max_regression, const std::string& format, const std::filesystem::path& out,
                   std::ostream& stdout_);

/// Chrome/Perfetto trace JSON (reports/trace.hpp) of trial `trial` of cell `cell` written to `out`. Returns 0.
int report_trace(const std::filesystem::path& input, const std::string& cell, int64_t trial,
                 const std::filesystem::path& out);

/// The `report` subcommand on a CLI11 app: `report RESULTS... [--markdown FILE]` (alias of `report table`),
/// `report table`, `report merge`, `report compare`, `report trace`, `report history`.
class ReportCommand {
 public:
  explicit ReportCommand(CLI::App& app);
  /// Whether `report` was given on the parsed command line.
  bool selected() const;
  /// Runs the parsed form; returns the exit code, throws on bad input.
  int run() const;

 private:
  CLI::App* report_ = nullptr;
  CLI::App* table_ = nullptr;
  CLI::App* merge_ = nullptr;
  CLI::App* compare_ = nullptr;
  CLI::App* trace_ = nullptr;
  CLI::App* history_ = nullptr;
  std::vector<std::filesystem::path> inputs_;  // alias form, table, merge
  std::vector<std::filesystem::path> table_inputs_, merge_inputs_;
  std::filesystem::path markdown_, table_out_, merge_out_, compare_out_, trace_out_;
  std::string format_ = "text", compare_format_ = "text", max_regression_ = "10%";
  std::filesystem::path baseline_, candidate_, trace_input_;
  std::string trace_cell_;
  int64_t trace_trial_ = 0;
  PlotArgs table_plots_;
  std::vector<std::filesystem::path> history_inputs_;
  std::filesystem::path history_out_ = "history";
  std::string history_metrics_ = "pause,envelope,prepare,commit", history_max_regression_ = "10%",
              history_gnuplot_ = "gnuplot";
};

}  // namespace wsb
