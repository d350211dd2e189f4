#pragma once
// Per-phase statistics of a cell with efficiency against the physics floors.
//
// Ratio to floor = achieved time / floor time, where floor time = bytes / floor bandwidth; so 1.00 means the
// phase ran at the measured physical limit and 3.00 means it took three times as long as physics requires.
// (It equals floor GB/s / achieved GB/s.)
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/results.hpp"
#include "reports/stats.hpp"

namespace wsb {

/// One phase name of a cell, aggregated over its trials.
struct PhaseStat {
  std::string name;
  std::string floor;               ///< floor name of the phase's first occurrence ("" = none)
  Summary seconds;                 ///< over the trials that have the phase
  double bytes = 0;                ///< median over those trials of the phase's bytes
  std::optional<double> gbps;      ///< bytes / median seconds / 1e9; nullopt when bytes or time is 0
  std::optional<double> floor_gbps;   ///< the cell's measured floor for `floor`; nullopt when none
  std::optional<double> floor_ratio;  ///< median seconds / (bytes / floor bandwidth); nullopt when not computable
};

/// Measured bandwidth of floor `name` in `floors`, GB/s: the field "<name>_gbps" ("disk_read" ->
/// disk_read_gbps, "h2d" -> h2d_gbps, "host_memcpy" -> host_memcpy_gbps, any other name -> a numeric key
/// "<name>_gbps" in floors.extra). nullopt for "", for an unknown name, or a non-positive value.
std::optional<double> floor_gbps(const Floors& floors, std::string_view name);

/// One entry per distinct phase name, in order of first appearance across trials. A name repeated inside one
/// trial (e.g. one entry per rank) is summed within that trial: seconds and bytes both add up.
std::vector<PhaseStat> phase_stats(const Cell& cell);

}  // namespace wsb
