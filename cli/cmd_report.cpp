#include "cli/cmd_report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "reports/cell_plots.hpp"
#include "reports/compare.hpp"
#include "reports/history_report.hpp"
#include "reports/merge.hpp"
#include "reports/metric_floor.hpp"
#include "reports/report_markdown.hpp"
#include "reports/report_tables.hpp"
#include "reports/results_io.hpp"
#include "reports/table_export.hpp"
#include "reports/trace.hpp"
#include "reports/verdict.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

/// The same results file twice would count every trial twice in the fleet means.
void refuse_duplicates(const std::vector<fs::path>& inputs) {
  std::set<fs::path> seen;
  for (const auto& p : inputs) {
    std::error_code ec;
    const fs::path key = fs::weakly_canonical(p, ec);
    if (!seen.insert(ec ? p : key).second) {
      throw std::runtime_error(fmt::format("{}: given twice: each results file may be merged once", p.string()));
    }
  }
}

Results load_all(const std::vector<fs::path>& inputs) {
  if (inputs.empty()) throw std::runtime_error("report: no results files given");
  refuse_duplicates(inputs);
  return inputs.size() == 1 ? load_results(inputs[0]) : merge_result_files(inputs);
}

TableFormat table_format(const std::string& name) {
  const auto f = parse_table_format(name);
  if (!f) throw std::runtime_error(fmt::format("--format: '{}' is not one of text, markdown, json, csv", name));
  return *f;
}

bool to_stdout(const fs::path& out) { return out.empty() || out == "-"; }

void write_text(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
    f << text;
    f.flush();
    if (!f) throw std::runtime_error(fmt::format("{}: write failed: {}", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot replace: {}", path.string(), ec.message()));
}

void emit(const fs::path& out, const std::string& text, std::ostream& stdout_) {
  if (to_stdout(out)) {
    stdout_ << text;
  } else {
    write_text(out, text);
  }
}

bool any_failed(const Results& r) {
  for (const Cell& c : r.cells) {
    if (cell_verdict(c).status == Status::Fail) return true;
  }
  return false;
}

}  // namespace

int report_table(const std::vector<fs::path>& inputs, const std::string& format, const fs::path& out,
                 const fs::path& markdown_out, std::ostream& stdout_, const PlotArgs& plots, std::ostream* stderr_) {
  const TableFormat f = table_format(format);
  const Results results = load_all(inputs);
  const std::string text = render_tables(results, f);
  const std::string markdown = markdown_out.empty() ? "" : render_report_markdown(results);
  emit(out, text, stdout_);
  if (!markdown_out.empty()) write_text(markdown_out, markdown);
  if (!plots.dir.empty()) {
    std::ostream& err = stderr_ ? *stderr_ : std::cerr;
    const PlotOutcome done = write_plots(plots.dir, cell_plot_jobs(results.cells), plots.gnuplot);
    for (const std::string& p : done.problems) err << "report table --plots: " << p << "\n";
    for (const std::string& stem : done.drawn) err << "plot: " << (plots.dir / (stem + ".svg")).string() << "\n";
  }
  return any_failed(results) ? 1 : 0;
}

int report_history(const std::vector<fs::path>& inputs, const fs::path& out_dir, const std::string& metrics,
                   const std::string& max_regression, const std::string& gnuplot, std::ostream& stdout_,
                   std::ostream& stderr_) {
  if (inputs.empty()) throw std::runtime_error("report history: no results files given");
  if (out_dir.empty()) throw std::runtime_error("report history: -o DIR must not be empty");
  refuse_duplicates(inputs);
  const double threshold = parse_regression_threshold(max_regression);
  const std::vector<std::string> metric_list = parse_metric_list(metrics, "--metric");
  std::vector<Results> results;
  std::vector<std::string> sources;
  for (const fs::path& p : inputs) {
    results.push_back(load_results(p));
    sources.push_back(p.string());
  }
  const History history = build_history(results, sources, metric_list, threshold);
  const std::vector<PlotJob> jobs = history_plot_jobs(history);
  const PlotOutcome plots = write_plots(out_dir, jobs, gnuplot);
  for (const std::string& p : plots.problems) stderr_ << "report history: " << p << "\n";
  std::string note;
  if (!plots.gnuplot_found) {
    note = fmt::format("No plots: {} was not found when this page was written (Debian package gnuplot-nox); each "
                       "plot's script (.gp) and data (.dat) are in this folder.",
                       gnuplot);
  } else if (plots.drawn.size() < jobs.size()) {
    note = fmt::format("{} of {} plots could not be drawn (see the message of wsbench report history).",
                       jobs.size() - plots.drawn.size(), jobs.size());
  }
  const fs::path md = out_dir / "history.md";
  write_text(md, render_history_markdown(history, jobs, plots.drawn, note));
  const auto newest = history.newest_regressions();
  for (const HistorySeries* s : newest) {
    const HistoryPoint& p = s->points.back();
    const HistoryRun& run = history.runs[p.run];
    stdout_ << fmt::format("regression: {} {} {:.2f}x the previous point ({} {})\n", config_name(s->key), s->metric,
                           *p.change, run.date_utc, run.build_commit);
  }
  size_t configurations = 0;
  for (size_t i = 0; i < history.series.size(); ++i) {
    if (i == 0 || history.series[i].key != history.series[i - 1].key) ++configurations;
  }
  stdout_ << fmt::format("history: {} results files, {} configurations, {} plots -> {}\n", history.runs.size(),
                         configurations, plots.drawn.size(), md.string());
  return newest.empty() ? 0 : 1;
}

int report_merge(const std::vector<fs::path>& inputs, const fs::path& out, std::ostream& stdout_) {
  if (out.empty()) throw std::runtime_error("report merge: -o FILE is required");
  refuse_duplicates(inputs);
  const Results merged = merge_result_files(inputs);
  save_results(out, merged);
  stdout_ << fmt::format("merged {} files: {} hosts, {} cells -> {}\n", inputs.size(), merged.hosts.size(),
                         merged.cells.size(), out.string());
  return 0;
}

double parse_regression_threshold(const std::string& text) {
  std::string s = text;
  const bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !(v >= 0) || !std::isfinite(v)) {
    throw std::runtime_error(
        fmt::format("--max-regression: '{}' is not a non-negative percentage (\"10%\") or fraction (\"0.1\")", text));
  }
  // "10" is ambiguous (10% or 1000%?): a bare number must be a fraction, at most 1 (100%).
  if (!percent && v > 1.0) {
    throw std::runtime_error(fmt::format("--max-regression: '{}' is ambiguous: write \"{}%\" for a percentage or a "
                                         "fraction <= 1 such as \"0.1\"",
                                         text, s));
  }
  return percent ? v / 100.0 : v;
}

int report_compare(const fs::path& baseline, const fs::path& candidate, const std::string& max_regression,
                   const std::string& format, const fs::path& out, std::ostream& stdout_) {
  const double threshold = parse_regression_threshold(max_regression);
  const TableFormat f = table_format(format);
  const Results base = load_results(baseline);
  const Results cand = load_results(candidate);
  if (auto why = configuration_mismatch(base, cand)) {
    throw std::runtime_error(fmt::format("configurations differ: {} (baseline {}, candidate {})", *why,
                                         baseline.string(), candidate.string()));
  }
  const Comparison comparison = compare_results(base, cand, threshold);
  const Table table = comparison_table(comparison);
  std::string text;
  switch (f) {
    case TableFormat::Text: text = render_text(table); break;
    case TableFormat::Markdown: text = render_markdown(table); break;
    case TableFormat::Json: text = table_json(table).dump(2) + "\n"; break;
    case TableFormat::Csv: text = render_csv(table); break;
  }
  std::string failures;
  for (const Cell& c : cand.cells) {
    const CellVerdict v = cell_verdict(c);
    if (v.status == Status::Fail) failures += fmt::format("candidate check failed: {} on {}: {}\n", c.id, c.host, v.reason);
  }
  emit(out, text, stdout_);
  stdout_ << failures;
  const bool fail = comparison.regressed || !failures.empty();
  stdout_ << fmt::format("compare: {} (max regression {:.4g}%)\n", fail ? "FAIL" : "ok", threshold * 100.0);
  return fail ? 1 : 0;
}

int report_trace(const fs::path& input, const std::string& cell, int64_t trial, const fs::path& out) {
  if (out.empty()) throw std::runtime_error("report trace: -o FILE is required");
  const Results results = load_results(input);
  const Cell* c = nullptr;
  const Trial& t = find_trial(results, input.string(), cell, trial, &c);
  write_text(out, trial_trace(*c, t).dump() + "\n");
  return 0;
}

ReportCommand::ReportCommand(CLI::App& app) {
  report_ = app.add_subcommand("report", "tables, merge, compare and traces of results.json files");
  report_->require_subcommand(0, 1);
  report_->add_option("results", inputs_, "results.json files (same as `report table`)")->check(CLI::ExistingFile);
  report_->add_option("--markdown", markdown_, "also write report.md here");

  table_ = report_->add_subcommand("table", "tables of one results file, or of several merged (hosts, shards)");
  table_->add_option("results", table_inputs_, "results.json files")->required()->check(CLI::ExistingFile);
  table_->add_option("--format", format_, "text | markdown | json | csv")
      ->check(CLI::IsMember({"text", "markdown", "json", "csv"}));
  table_->add_option("-o,--out", table_out_, "output file (default: stdout)");
  table_->add_option("--markdown", markdown_, "also write report.md here");
  table_->add_option("--plots", table_plots_.dir, "also write pause.svg and loop.svg (per cell, with floors) here");
  table_->add_option("--gnuplot", table_plots_.gnuplot, "gnuplot program drawing the plots (name on PATH or path)");

  merge_ = report_->add_subcommand("merge", "merge results of many hosts into one fleet results file");
  merge_->add_option("results", merge_inputs_, "results.json files")->required()->check(CLI::ExistingFile);
  merge_->add_option("-o,--out", merge_out_, "merged results file")->required();

  compare_ = report_->add_subcommand("compare", "baseline vs candidate; exit 1 on a regression or a failed check");
  compare_->add_option("baseline", baseline_, "baseline results.json")->required()->check(CLI::ExistingFile);
  compare_->add_option("candidate", candidate_, "candidate results.json")->required()->check(CLI::ExistingFile);
  compare_->add_option("--max-regression", max_regression_, "allowed slowdown per metric, \"10%\" or \"0.1\"");
  compare_->add_option("--format", compare_format_, "text | markdown | json | csv")
      ->check(CLI::IsMember({"text", "markdown", "json", "csv"}));
  compare_->add_option("-o,--out", compare_out_, "table output file (default: stdout)");

  trace_ = report_->add_subcommand("trace", "Chrome/Perfetto trace JSON of one trial");
  trace_->add_option("results", trace_input_, "results.json")->required()->check(CLI::ExistingFile);
  trace_->add_option("--cell", trace_cell_, "cell id")->required();
  trace_->add_option("--trial", trace_trial_, "trial index")->required();
  trace_->add_option("-o,--out", trace_out_, "trace file (open in ui.perfetto.dev)")->required();

  history_ = report_->add_subcommand(
      "history", "nightly history: results ordered by date and commit, per configuration tables and plots");
  history_->add_option("results", history_inputs_, "results.json files, one per run (merge a night's hosts first)")
      ->required()
      ->check(CLI::ExistingFile);
  history_->add_option("-o,--out", history_out_, "output folder: history.md and the plots (default: history)");
  history_->add_option("--metric", history_metrics_, "comma-separated: pause, envelope, prepare, commit");
  history_->add_option("--max-regression", history_max_regression_,
                       "a point slower than the previous one by more than this is a regression, \"10%\" or \"0.1\"");
  history_->add_option("--gnuplot", history_gnuplot_, "gnuplot program drawing the plots (name on PATH or path)");
}

bool ReportCommand::selected() const { return report_->parsed(); }

int ReportCommand::run() const {
  if (table_->parsed()) {
    return report_table(table_inputs_, format_, table_out_, markdown_, std::cout, table_plots_, &std::cerr);
  }
  if (history_->parsed()) {
    return report_history(history_inputs_, history_out_, history_metrics_, history_max_regression_, history_gnuplot_,
                          std::cout, std::cerr);
  }
  if (merge_->parsed()) return report_merge(merge_inputs_, merge_out_, std::cout);
  if (compare_->parsed()) {
    return report_compare(baseline_, candidate_, max_regression_, compare_format_, compare_out_, std::cout);
  }
  if (trace_->parsed()) return report_trace(trace_input_, trace_cell_, trace_trial_, trace_out_);
  if (inputs_.empty()) throw std::runtime_error("report: give results files, or one of table, merge, compare, trace, history");
  return report_table(inputs_, "text", "", markdown_, std::cout);
}

}  // namespace wsb
