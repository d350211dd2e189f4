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
               {"hosts", MetricKind::Count},
               {"Pause mean \u00b1 95% CI", MetricKind::DurationMeanCI},
               {"Loop mean \u00b1 95% CI", MetricKind::DurationMeanCI}};
  const std::vector<ConfigGroup> groups = group_by_config(cells);
  std::vector<ConfigKey> keys;
  for (const ConfigGroup& g : groups) keys.push_back(g.key);
  const std::vector<std::string> labels = model_labels(keys);
  for (size_t i = 0; i < groups.size(); ++i) {
    const ConfigGroup& g = groups[i];
    t.rows.push_back({labels[i], g.key.mode, g.key.runtime, static_cast<double>(g.hosts.size()),
                      mean_ci(g, "pause"), mean_ci(g, "envelope")});
  }
  return t;
}

}  // namespace wsb
