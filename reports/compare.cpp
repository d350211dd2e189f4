#include "reports/compare.hpp"

#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/host_stats.hpp"
#include "reports/verdict.hpp"

namespace wsb {
namespace {

std::optional<double> group_mean(const ConfigGroup* g, std::string_view key) {
  if (g == nullptr) return std::nullopt;
  const auto s = group_host_stat(*g, key);
  if (!s) return std::nullopt;
  return s->mean;
}

CompareMetric metric(const ConfigGroup* base, const ConfigGroup* cand, std::string_view key) {
  CompareMetric m{group_mean(base, key), group_mean(cand, key), std::nullopt};
  if (m.baseline && m.candidate && *m.baseline > 0) m.ratio = *m.candidate / *m.baseline;
  return m;
}

// First failure reason among the group's cells, or nullopt when every cell passed or was skipped.
std::optional<std::string> failure(const ConfigGroup* g) {
  if (g == nullptr) return std::nullopt;
  for (const Cell* c : g->cells) {
    const CellVerdict v = cell_verdict(*c);
    if (v.status == Status::Fail) return v.reason;
  }
  return std::nullopt;
}

void judge(CompareRow& row, const ConfigGroup* base, const ConfigGroup* cand, double threshold) {
  if (!row.in_candidate) {
    row.verdict = "only in baseline";
    return;
  }
  if (!row.in_baseline) {
    row.verdict = "only in candidate";
    return;
  }
  std::vector<std::string> why;
  auto over = [&](const CompareMetric& m, const char* name) {
    if (m.ratio && *m.ratio > 1.0 + threshold) why.push_back(fmt::format("{} {:.2f}x > {:.2f}x", name, *m.ratio, 1.0 + threshold));
  };
  over(row.prepare, time_keys::kPrepare);
  over(row.commit, time_keys::kCommit);
  over(row.pause, time_keys::kPause);
  over(row.loop, "loop");
  const auto cand_fail = failure(cand);
  if (cand_fail && !failure(base)) why.push_back("failed check in candidate: " + *cand_fail);
  // A cell the baseline measured but the candidate skipped was never measured: the gate cannot pass on it.
  if (!row.pause.candidate && !row.loop.candidate && (row.pause.baseline || row.loop.baseline)) {
    why.push_back("candidate has no measured trial (skipped or empty) where the baseline has");
  }
  row.regression = !why.empty();
  if (!row.regression) {
    row.verdict = "ok";
    return;
  }
  row.verdict = "REGRESSION: ";
  for (size_t i = 0; i < why.size(); ++i) row.verdict += (i ? "; " : "") + why[i];
}

Value seconds_or_na(const std::optional<double>& v) {
  if (!v) return Value{};
  return *v;
}

}  // namespace

Comparison compare_results(const Results& baseline, const Results& candidate, double threshold) {
  if (!std::isfinite(threshold) || threshold < 0) {
    throw std::invalid_argument(fmt::format("compare: threshold must be a finite number >= 0, got {}", threshold));
  }
  const std::vector<ConfigGroup> base = group_by_config(baseline.cells);
  const std::vector<ConfigGroup> cand = group_by_config(candidate.cells);
  std::map<ConfigKey, const ConfigGroup*> base_by_key;
  std::map<ConfigKey, const ConfigGroup*> cand_by_key;
  for (const ConfigGroup& g : base) base_by_key[g.key] = &g;
  for (const ConfigGroup& g : cand) cand_by_key[g.key] = &g;

  Comparison out;
  out.threshold = threshold;
  auto add = [&](const ConfigKey& key) {
    const ConfigGroup* b = base_by_key.count(key) ? base_by_key[key] : nullptr;
    const ConfigGroup* c = cand_by_key.count(key) ? cand_by_key[key] : nullptr;
    CompareRow row;
    row.key = key;
    row.in_baseline = b != nullptr;
    row.in_candidate = c != nullptr;
    row.prepare = metric(b, c, time_keys::kPrepare);
    row.commit = metric(b, c, time_keys::kCommit);
    row.pause = metric(b, c, time_keys::kPause);
    row.loop = metric(b, c, time_keys::kEnvelope);
    judge(row, b, c, threshold);
    out.regressed = out.regressed || row.regression;
    out.rows.push_back(std::move(row));
  };
  for (const ConfigGroup& g : base) add(g.key);
  for (const ConfigGroup& g : cand) {
    if (!base_by_key.count(g.key)) add(g.key);
  }
  return out;
}

std::optional<std::string> configuration_mismatch(const Results& baseline, const Results& candidate) {
  static constexpr const char* kWorkload[] = {"seed",    "target",  "publish_versions", "encoding",
                                              "density", "layers",  "experts",          "prepare_threads",
                                              "floor_bytes", "chunk_bytes", "copy_streams"};
  auto first_by_key = [](const Results& r) {
    std::map<ConfigKey, const Cell*> out;
    for (const Cell& c : r.cells) out.emplace(config_key(c), &c);
    return out;
  };
  const auto base = first_by_key(baseline);
  const auto cand = first_by_key(candidate);
  auto name = [](const ConfigKey& k) { return fmt::format("{}/{}/{}/tp{}", k.model, k.mode, k.runtime, k.tp); };
  for (const auto& [key, cell] : base) {
    if (!cand.count(key)) return fmt::format("{}: in baseline only", name(key));
  }
  for (const auto& [key, cell] : cand) {
    if (!base.count(key)) return fmt::format("{}: in candidate only", name(key));
  }
  auto field = [](const Cell& c, const char* k) {
    auto it = c.extra.find(k);
    return it == c.extra.end() ? std::string("absent") : it->dump();
  };
  for (const auto& [key, b] : base) {
    const Cell& c = *cand.at(key);
    for (const char* k : kWorkload) {
      const std::string bv = field(*b, k), cv = field(c, k);
      if (bv != cv) return fmt::format("{}: {} {} in baseline, {} in candidate", name(key), k, bv, cv);
    }
  }
  return std::nullopt;
}

Table comparison_table(const Comparison& comparison) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},       {"Mode", MetricKind::Text},        {"Runtime", MetricKind::Text},
               {"Prepare ratio", MetricKind::Ratio}, {"Commit ratio", MetricKind::Ratio},
               {"Pause base", MetricKind::Duration}, {"Pause cand", MetricKind::Duration}, {"Pause ratio", MetricKind::Ratio},
               {"Loop base", MetricKind::Duration},  {"Loop cand", MetricKind::Duration},  {"Loop ratio", MetricKind::Ratio},
               {"Verdict", MetricKind::Text}};
  std::vector<ConfigKey> keys;
  for (const CompareRow& r : comparison.rows) keys.push_back(r.key);
  const std::vector<std::string> labels = model_labels(keys);
  for (size_t i = 0; i < comparison.rows.size(); ++i) {
    const CompareRow& r = comparison.rows[i];
    t.rows.push_back({labels[i], r.key.mode, r.key.runtime, seconds_or_na(r.prepare.ratio),
                      seconds_or_na(r.commit.ratio), seconds_or_na(r.pause.baseline),
                      seconds_or_na(r.pause.candidate), seconds_or_na(r.pause.ratio), seconds_or_na(r.loop.baseline),
                      seconds_or_na(r.loop.candidate), seconds_or_na(r.loop.ratio), r.verdict});
  }
  return t;
}

}  // namespace wsb
