#pragma once
// The configuration a cell measures, independent of host and engine: the unit of cross-host grouping and of
// baseline/candidate matching.
#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reports/results.hpp"

namespace wsb {

/// (model, mode, runtime, tp) of a cell.
struct ConfigKey {
  std::string model;
  std::string mode;
  std::string runtime;
  int64_t tp = 1;
  auto operator<=>(const ConfigKey&) const = default;
};

ConfigKey config_key(const Cell& cell);

/// The Model column text for each key: the model id, followed by " tp<N>" only when the same
/// (model, mode, runtime) appears with several tp values among `keys`, so that rows stay distinguishable
/// without widening every table by a TP column.
std::vector<std::string> model_labels(std::span<const ConfigKey> keys);

/// True when two of `cells` have the same configuration and host: cells that differ only in a workload field
/// (encoding, target, density, bucket size, checkpoint, ...) whose per-cell rows would print alike, so the tables
/// add a "Cell" column with each cell's id.
bool cells_need_ids(std::span<const Cell> cells);

}  // namespace wsb
