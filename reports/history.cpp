#include "reports/history.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/host_stats.hpp"
#include "reports/metric_floor.hpp"
#include "reports/verdict.hpp"

namespace wsb {
namespace {

HistoryRun run_of(const Results& r, const std::string& source) {
  HistoryRun run;
  run.source = source;
  run.matrix = r.matrix;
  run.hosts = r.hosts.empty() ? 1 : r.hosts.size();
  run.date_utc = r.context.date_utc;
  run.build_commit = r.context.build_commit;
  // merge_results leaves a field empty where the hosts disagree: fall back to the hosts' own values.
  if (run.date_utc.empty()) {
    for (const Context& h : r.hosts) {
      if (!h.date_utc.empty() && (run.date_utc.empty() || h.date_utc < run.date_utc)) run.date_utc = h.date_utc;
    }
  }
  if (run.build_commit.empty()) {
    std::vector<std::string> commits;
    for (const Context& h : r.hosts) {
      if (!h.build_commit.empty() && std::find(commits.begin(), commits.end(), h.build_commit) == commits.end()) {
        commits.push_back(h.build_commit);
      }
    }
    run.build_commit = fmt::format("{}", fmt::join(commits, "+"));
  }
  return run;
}

HistoryPoint point_of(const ConfigGroup& g, const std::string& metric, size_t run) {
  HistoryPoint p;
  p.run = run;
  p.hosts = g.hosts.size();
  if (auto s = group_host_stat(g, metric)) {
    p.mean = s->mean;
    p.half_width = s->half_width;
    p.hosts = s->hosts;
  }
  std::vector<double> floors;
  for (const Cell* c : g.cells) {
    if (auto f = metric_floor_seconds(*c, metric)) floors.push_back(*f);
    p.failed = p.failed || cell_verdict(*c).status == Status::Fail;
  }
  if (!floors.empty()) {
    double sum = 0;
    for (double f : floors) sum += f;
    p.floor = sum / static_cast<double>(floors.size());
  }
  if (p.mean && p.floor && *p.floor > 0) p.floor_ratio = *p.mean / *p.floor;
  return p;
}

Value or_na(const std::optional<double>& v) {
  if (!v) return Value{};
  return *v;
}

}  // namespace

std::vector<const HistorySeries*> History::newest_regressions() const {
  std::vector<const HistorySeries*> out;
  for (const HistorySeries& s : series) {
    if (!s.points.empty() && s.points.back().regression) out.push_back(&s);
  }
  return out;
}

History build_history(std::span<const Results> results, std::span<const std::string> sources,
                      const std::vector<std::string>& metrics, double threshold) {
  if (results.size() != sources.size()) throw std::invalid_argument("build_history: one source name per results");
  if (metrics.empty()) throw std::invalid_argument("build_history: no metric");
  for (const std::string& m : metrics) {
    const auto& known = history_metric_names();
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      throw std::invalid_argument(fmt::format("build_history: unknown metric '{}'", m));
    }
  }
  if (!std::isfinite(threshold) || threshold < 0) {
    throw std::invalid_argument(fmt::format("history: threshold must be a finite number >= 0, got {}", threshold));
  }
  History h;
  h.threshold = threshold;
  h.metrics = metrics;
  std::vector<size_t> order(results.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<HistoryRun> runs;
  for (size_t i = 0; i < results.size(); ++i) runs.push_back(run_of(results[i], sources[i]));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(runs[a].date_utc, runs[a].build_commit) < std::tie(runs[b].date_utc, runs[b].build_commit);
  });

  std::map<std::pair<ConfigKey, std::string>, size_t> index;
  for (size_t r = 0; r < order.size(); ++r) {
    const Results& res = results[order[r]];
    h.runs.push_back(runs[order[r]]);
    for (const ConfigGroup& g : group_by_config(res.cells)) {
      for (const std::string& metric : metrics) {
        auto [it, fresh] = index.emplace(std::pair{g.key, metric}, h.series.size());
        if (fresh) h.series.push_back(HistorySeries{g.key, metric, {}});
        h.series[it->second].points.push_back(point_of(g, metric, r));
      }
    }
  }
  // Series were appended per configuration as first seen, metrics in order: the promised order already.
  for (HistorySeries& s : h.series) {
    std::optional<double> previous;
    for (HistoryPoint& p : s.points) {
      if (!p.mean) continue;
      if (previous && *previous > 0) {
        p.change = *p.mean / *previous;
        p.regression = *p.change > 1.0 + threshold;
      }
      previous = p.mean;
    }
  }
  return h;
}

std::string config_name(const ConfigKey& key) {
  return fmt::format("{}/{}/{}/tp{}", key.model, key.mode, key.runtime, key.tp);
}

Table history_table(const History& history, const HistorySeries& series) {
  Table t;
  t.columns = {{"Date", MetricKind::Text},          {"Commit", MetricKind::Text},
               {"Hosts", MetricKind::Count},        {"Mean", MetricKind::Duration},
               {"95% CI ±", MetricKind::Duration},  {"Floor", MetricKind::Duration},
               {"Ratio to floor", MetricKind::Ratio}, {"vs previous", MetricKind::Ratio},
               {"Verdict", MetricKind::Text}};
  for (const HistoryPoint& p : series.points) {
    const HistoryRun& run = history.runs[p.run];
    std::vector<std::string> verdict;
    if (p.regression) verdict.push_back(fmt::format("REGRESSION ({:.2f}x > {:.2f}x)", *p.change, 1.0 + history.threshold));
    if (p.failed) verdict.push_back("checks failed");
    t.rows.push_back({run.date_utc, run.build_commit, static_cast<double>(p.hosts), or_na(p.mean),
                      or_na(p.half_width), or_na(p.floor), or_na(p.floor_ratio), or_na(p.change),
                      fmt::format("{}", fmt::join(verdict, "; "))});
  }
  return t;
}

Table history_runs_table(const History& history) {
  Table t;
  t.columns = {{"#", MetricKind::Count},     {"Date", MetricKind::Text},   {"Commit", MetricKind::Text},
               {"Hosts", MetricKind::Count}, {"Matrix", MetricKind::Text}, {"File", MetricKind::Text}};
  for (size_t i = 0; i < history.runs.size(); ++i) {
    const HistoryRun& r = history.runs[i];
    t.rows.push_back({static_cast<double>(i + 1), r.date_utc, r.build_commit, static_cast<double>(r.hosts), r.matrix,
                      r.source});
  }
  return t;
}

}  // namespace wsb
