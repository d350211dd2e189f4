#include "reports/checks_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/config_key.hpp"

namespace wsb {
namespace {

struct Tally {
  size_t passed = 0;
  size_t recorded = 0;
  std::string first_failed;
  void add(const Check& c) {
    ++recorded;
    if (c.pass) {
      ++passed;
    } else if (first_failed.empty()) {
      first_failed = c.name;
    }
  }
  Value text(bool name_failure) const {
    if (recorded == 0) return Value{};
    if (passed == recorded) return fmt::format("{}/{}", passed, recorded);
    if (name_failure) return fmt::format("FAIL {}/{}: {}", passed, recorded, first_failed);
    return fmt::format("FAIL {}/{}", passed, recorded);
  }
};

}  // namespace

const std::vector<std::string>& checks_table_names() {
  static const std::vector<std::string> names = {check_names::kProbesExact,
                                                 check_names::kGenerationDuringPrepare,
                                                 check_names::kChecksumsEqualNativeLoad,
                                                 check_names::kStoragePointersUnchanged,
                                                 check_names::kMissingTargetRejected,
                                                 check_names::kVersionIsTarget};
  return names;
}

Table checks_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},           {"Mode", MetricKind::Text},
               {"Runtime", MetricKind::Text},         {"n", MetricKind::Count},
               {"Fingerprints", MetricKind::Text},    {"Generation during prepare", MetricKind::Text},
               {"Native equality", MetricKind::Text}, {"Pointers", MetricKind::Text},
               {"Missing target", MetricKind::Text},  {"Version", MetricKind::Text},
               {"Other", MetricKind::Text},           {"Native equality via", MetricKind::Text}};
  const auto& names = checks_table_names();
  std::vector<ConfigKey> keys;
  for (const Cell& c : cells) keys.push_back(config_key(c));
  const std::vector<std::string> labels = model_labels(keys);
  const bool ids = cells_need_ids(cells);
  if (ids) t.columns.insert(t.columns.begin() + 3, Column{"Cell", MetricKind::Text});
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    std::vector<Tally> named(names.size());
    Tally other;
    for (const Trial& trial : c.trials) {
      for (const Check& check : trial.checks) {
        auto it = std::find(names.begin(), names.end(), check.name);
        if (it == names.end()) {
          other.add(check);
        } else {
          named[static_cast<size_t>(it - names.begin())].add(check);
        }
      }
    }
    std::vector<Value> row = {labels[i], c.mode_label(), c.runtime, static_cast<double>(c.trials.size())};
    if (ids) row.insert(row.begin() + 3, c.id);
    for (const Tally& n : named) row.push_back(n.text(false));
    row.push_back(other.text(true));
    // What the equality with a fresh native load compared (runtime storages, or an engine server's own checksum
    // endpoint); results of builds that did not record it show n/a.
    Value via;
    for (const Trial& trial : c.trials) {
      if (auto it = trial.extra.find("checksum_basis"); it != trial.extra.end() && it->is_string()) {
        via = it->get<std::string>();
        break;
      }
    }
    row.push_back(via);
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace wsb
