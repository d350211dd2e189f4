#pragma once
// The physical floor of a whole measured interval (prepare, commit, pause, envelope): the time its phases would
// take if each moved its bytes at the floor bandwidth measured in the same run.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reports/results.hpp"

namespace wsb {

/// The metrics a history or a plot follows, in their default order: "pause", "envelope", "prepare", "commit"
/// (the time_keys of the same names).
const std::vector<std::string>& history_metric_names();

/// Parses a comma-separated list of history_metric_names ("pause,envelope"), keeping its order. Throws
/// std::runtime_error naming `option` for an empty list, an unknown name or a name given twice.
std::vector<std::string> parse_metric_list(const std::string& text, const std::string& option);

/// Floor time of `metric` in `cell`, seconds: over the phases of the metric's stages (prepare: "prepare.*"; commit
/// and pause: "commit.*", the pause lying inside the commit; envelope: both), the sum of median bytes / floor GB/s
/// (phase_stats: the cell's own measured floors, GB = 1e9 B). Phases without a floor or without bytes add nothing.
/// nullopt when no phase of those stages has a measured floor, or for a metric not in history_metric_names.
std::optional<double> metric_floor_seconds(const Cell& cell, std::string_view metric);

}  // namespace wsb
