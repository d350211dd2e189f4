#include "reports/memory_table.hpp"

#include <algorithm>
#include <functional>

#include "reports/config_key.hpp"

namespace wsb {
namespace {

using nlohmann::json;

const json* find(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

/// Folds numbers into a running extreme.
struct Extreme {
  std::function<bool(double, double)> better;
  std::optional<double> value;
  void add(std::optional<double> v) {
    if (v && (!value || better(*v, *value))) value = v;
  }
  Value result() const { return value ? Value(*value) : Value(); }
};

Extreme highest() { return Extreme{std::greater<double>{}, std::nullopt}; }
Extreme lowest() { return Extreme{std::less<double>{}, std::nullopt}; }

void add_array(Extreme& e, const json* arr) {
  if (arr == nullptr || !arr->is_array()) return;
  for (const json& v : *arr) {
    if (v.is_number()) e.add(v.get<double>());
  }
}

}  // namespace

std::optional<double> memory_number(const json& obj, std::string_view a, std::string_view b) {
  const json* v = find(obj, a);
  if (v != nullptr && !b.empty()) v = find(*v, b);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

Table memory_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},           {"Mode", MetricKind::Text},
               {"Runtime", MetricKind::Text},         {"n", MetricKind::Count},
               {"Peak RSS", MetricKind::Bytes},       {"Prepare peak RSS", MetricKind::Bytes},
               {"Commit peak RSS", MetricKind::Bytes}, {"cgroup peak", MetricKind::Bytes},
               {"MemAvailable min", MetricKind::Bytes}, {"Page cache max", MetricKind::Bytes},
               {"Device used peak", MetricKind::Bytes}, {"Mode buffers", MetricKind::Bytes}};
  std::vector<ConfigKey> keys;
  for (const Cell& c : cells) keys.push_back(config_key(c));
  const std::vector<std::string> labels = model_labels(keys);
  const bool ids = cells_need_ids(cells);
  if (ids) t.columns.insert(t.columns.begin() + 3, Column{"Cell", MetricKind::Text});
  static constexpr std::string_view kWindows[] = {"prepare_peak", "commit_peak"};
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    Extreme rss = highest(), prep = highest(), commit = highest(), cgroup = highest(), avail = lowest(),
            cached = highest(), device = highest(), mode = highest();
    for (const Trial& trial : c.trials) {
      const json& m = trial.memory;
      rss.add(memory_number(m, "rss_peak_bytes"));
      prep.add(memory_number(m, "prepare_peak", "rss_peak_bytes"));
      commit.add(memory_number(m, "commit_peak", "rss_peak_bytes"));
      avail.add(memory_number(m, "mem_available_bytes"));
      cached.add(memory_number(m, "cached_bytes"));
      add_array(device, find(m, "device_used_bytes"));
      for (std::string_view w : kWindows) {
        cgroup.add(memory_number(m, w, "cgroup_current_peak_bytes"));
        avail.add(memory_number(m, w, "mem_available_min_bytes"));
        cached.add(memory_number(m, w, "cached_peak_bytes"));
        if (const json* win = find(m, w)) add_array(device, find(*win, "device_used_peak_bytes"));
      }
      std::optional<double> buffers;
      for (std::string_view k : {"mode_canonical_bytes", "mode_rank_image_bytes", "mode_staging_bytes"}) {
        if (auto v = memory_number(m, k)) buffers = buffers.value_or(0) + *v;
      }
      mode.add(buffers);
    }
    t.rows.push_back({labels[i], c.mode_label(), c.runtime, static_cast<double>(c.trials.size()), rss.result(),
                      prep.result(), commit.result(), cgroup.result(), avail.result(), cached.result(),
                      device.result(), mode.result()});
    if (ids) t.rows.back().insert(t.rows.back().begin() + 3, c.id);
  }
  return t;
}

}  // namespace wsb
