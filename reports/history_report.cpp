#include "reports/history_report.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace wsb {
namespace {

std::string short_commit(const std::string& commit) {
  std::string c = commit.substr(0, commit.find(' '));
  if (c.size() > 12) c.resize(12);
  return c;
}

std::string threshold_text(double threshold) { return fmt::format("{:.4g}%", threshold * 100.0); }

}  // namespace

Plot history_plot(const History& history, const HistorySeries& series) {
  Plot p;
  p.title = fmt::format("{}: {}", config_name(series.key), series.metric);
  p.value_title = fmt::format("{} mean, 95% CI over hosts", series.metric);
  p.marked_title = fmt::format("regression > {} vs previous", threshold_text(history.threshold));
  p.series = true;
  for (const HistoryPoint& point : series.points) {
    const HistoryRun& run = history.runs[point.run];
    PlotPoint pp;
    pp.label = fmt::format("{}\n{}", run.date_utc.empty() ? "?" : run.date_utc.substr(0, 10),
                           short_commit(run.build_commit));
    pp.value = point.mean;
    if (point.mean && point.half_width) {
      pp.low = *point.mean - *point.half_width;
      pp.high = *point.mean + *point.half_width;
    }
    pp.floor = point.floor;
    pp.marked = point.regression;
    p.points.push_back(std::move(pp));
  }
  return p;
}

std::vector<PlotJob> history_plot_jobs(const History& history) {
  std::vector<PlotJob> jobs;
  std::set<std::string> used;
  for (const HistorySeries& s : history.series) {
    const std::string base = plot_file_stem(config_name(s.key) + "-" + s.metric);
    std::string stem = base;
    for (int k = 2; !used.insert(stem).second; ++k) stem = fmt::format("{}-{}", base, k);
    jobs.push_back(PlotJob{stem, history_plot(history, s)});
  }
  return jobs;
}

std::string render_history_markdown(const History& history, const std::vector<PlotJob>& jobs,
                                     const std::vector<std::string>& drawn, const std::string& plot_note) {
  std::string out = "# wsbench history\n\n";
  out += fmt::format("{} results files, ordered by date, then build commit; metrics {}.\n\n", history.runs.size(),
                     fmt::join(history.metrics, ", "));
  out += render_markdown(history_runs_table(history));
  out += "\nMean: each host's mean over its trials, then the equal-weight mean of host means; 95% CI ±: the Student-t "
         "half-width over host means (n/a with one host). Floor: the time the metric's phases take at the floors "
         "measured in the same run (bytes \u00f7 floor GB/s, summed over the prepare.* phases for prepare, the "
         "commit.* phases for commit and pause, both for envelope; the mean over the configuration's cells). Ratio to "
         "floor: Mean \u00f7 Floor. vs previous: Mean \u00f7 the previous measured Mean; REGRESSION beyond " +
         threshold_text(history.threshold) + ".\n";
  if (!plot_note.empty()) out += "\n" + plot_note + "\n";

  out += "\n## Regressions in the newest point\n\n";
  const auto newest = history.newest_regressions();
  if (newest.empty()) out += "None.\n";
  for (const HistorySeries* s : newest) {
    const HistoryPoint& p = s->points.back();
    const HistoryRun& run = history.runs[p.run];
    out += fmt::format("- `{}` {}: {:.2f}x the previous point ({} {})\n", config_name(s->key), s->metric, *p.change,
                       run.date_utc, run.build_commit);
  }

  std::optional<ConfigKey> current;
  for (size_t i = 0; i < history.series.size(); ++i) {
    const HistorySeries& s = history.series[i];
    if (!current || *current != s.key) {
      current = s.key;
      out += fmt::format("\n## `{}`\n", config_name(s.key));
    }
    out += fmt::format("\n### {}\n\n", s.metric);
    const bool has_plot = i < jobs.size() && std::find(drawn.begin(), drawn.end(), jobs[i].stem) != drawn.end();
    if (has_plot) out += fmt::format("![{} of {}]({}.svg)\n\n", s.metric, config_name(s.key), jobs[i].stem);
    out += render_markdown(history_table(history, s));
  }
  return out;
}

}  // namespace wsb
