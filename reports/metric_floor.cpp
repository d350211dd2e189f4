#include "reports/metric_floor.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/phase_stats.hpp"

namespace wsb {

const std::vector<std::string>& history_metric_names() {
  static const std::vector<std::string> names = {time_keys::kPause, time_keys::kEnvelope, time_keys::kPrepare,
                                                 time_keys::kCommit};
  return names;
}

std::vector<std::string> parse_metric_list(const std::string& text, const std::string& option) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const auto& known = history_metric_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::runtime_error(fmt::format("{}: '{}' is not one of {}", option, name, fmt::join(known, ", ")));
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      throw std::runtime_error(fmt::format("{}: '{}' is given twice", option, name));
    }
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

std::optional<double> metric_floor_seconds(const Cell& cell, std::string_view metric) {
  const bool prepare = metric == time_keys::kPrepare || metric == time_keys::kEnvelope;
  const bool commit = metric == time_keys::kCommit || metric == time_keys::kPause || metric == time_keys::kEnvelope;
  std::optional<double> total;
  for (const PhaseStat& s : phase_stats(cell)) {
    const bool in_stage = (prepare && s.name.starts_with("prepare.")) || (commit && s.name.starts_with("commit."));
    if (!in_stage || !s.floor_gbps || s.bytes <= 0) continue;
    total = total.value_or(0) + s.bytes / (*s.floor_gbps * 1e9);
  }
  return total;
}

}  // namespace wsb
