#include "reports/summary_table.hpp"

#include "reports/config_key.hpp"
#include "reports/stats.hpp"
#include "reports/verdict.hpp"

namespace wsb {
namespace {

Value range_of(const Cell& cell, std::string_view key) {
  const auto s = time_summary(cell, key);
  if (!s) return Value{};
  return Range{s->min, s->max};
}

}  // namespace

Table summary_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},
               {"Mode", MetricKind::Text},
               {"Runtime", MetricKind::Text},
               {"n", MetricKind::Count},
               {"Pause range", MetricKind::DurationRange},
               {"Pause ≤ commit call", MetricKind::DurationRange},
               {"Max stall range", MetricKind::DurationRange},
               {"Complete loop range", MetricKind::DurationRange},
               {"Checks", MetricKind::Text}};
  std::vector<ConfigKey> keys;
  bool several_hosts = false;
  for (const Cell& c : cells) {
    keys.push_back(config_key(c));
    several_hosts = several_hosts || c.host != cells.front().host;
  }
  const bool ids = cells_need_ids(cells);
  if (ids) t.columns.insert(t.columns.begin() + 3, Column{"Cell", MetricKind::Text});
  if (several_hosts) t.columns.insert(t.columns.begin() + 3, Column{"Host", MetricKind::Text});
  const std::vector<std::string> labels = model_labels(keys);
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    std::vector<Value> row = {labels[i], c.mode_label(), c.runtime, static_cast<double>(c.trials.size()),
                              range_of(c, time_keys::kPause), range_of(c, time_keys::kPauseBound),
                              range_of(c, time_keys::kMaxStall), range_of(c, time_keys::kEnvelope),
                              verdict_text(cell_verdict(c))};
    if (ids) row.insert(row.begin() + 3, c.id);
    if (several_hosts) row.insert(row.begin() + 3, c.host);
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace wsb
