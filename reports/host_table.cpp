#include "reports/host_table.hpp"

#include "reports/host_stats.hpp"

namespace wsb {
namespace {

Value mean_ci(const ConfigGroup& g, std::string_view key) {
  const auto s = group_host_stat(g, key);
  if (!s) return Value{};
  return MeanCI{s->mean, s->half_width};
}

}  // namespace

Table host_mean_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},
               {"Mode", MetricKind::Text},
               {"Runtime", MetricKind::Text},
               {"Prepare", MetricKind::DurationMeanCI},
               {"Commit", MetricKind::DurationMeanCI},
               {"Pause upper bound", MetricKind::DurationMeanCI},
               {"Envelope", MetricKind::DurationMeanCI},
               {"Hosts", MetricKind::Count},
               {"Runs", MetricKind::Count}};
  const std::vector<ConfigGroup> groups = group_by_config(cells);
  std::vector<ConfigKey> keys;
  for (const ConfigGroup& g : groups) keys.push_back(g.key);
  const std::vector<std::string> labels = model_labels(keys);
  for (size_t i = 0; i < groups.size(); ++i) {
    const ConfigGroup& g = groups[i];
    size_t runs = 0;
    for (const Cell* c : g.cells) runs += c->trials.size();
    t.rows.push_back({labels[i], g.key.mode, g.key.runtime, mean_ci(g, time_keys::kPrepare), mean_ci(g, time_keys::kCommit),
                      mean_ci(g, time_keys::kPause), mean_ci(g, time_keys::kEnvelope), static_cast<double>(g.hosts.size()),
                      static_cast<double>(runs)});
  }
  return t;
}

}  // namespace wsb
