#pragma once
// Checks table, one row per cell, from each trial's "checks" array (harness/profiler.cpp):
//   Model | Mode | Runtime | n | Fingerprints | Generation during prepare | Native equality | Pointers |
//   Missing target | Version | Other
// Fingerprints = probes_exact (every probe response before, during and after the update at one version with that
// version's exact fingerprint); Native equality = checksums_equal_native_load; Pointers =
// storage_pointers_unchanged; Missing target = missing_target_rejected; Version = version_is_target; Other = every
// other check (fresh_engines_agree, update_succeeds, ...). A value is "<passed>/<recorded>" over the trials that
// recorded the check ("3/3"), "FAIL <passed>/<recorded>" when any failed (for Other, "FAIL <passed>/<recorded>:
// <first failed name>"), and "n/a" when no trial recorded it.
#include <span>
#include <string>
#include <vector>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// The check names with their own column, in column order.
const std::vector<std::string>& checks_table_names();

/// Rows in cell order; Model gets " tp<N>" only where needed (model_labels); a "Cell" column (the id) follows
/// Runtime when two cells share configuration and host (cells_need_ids).
Table checks_table(std::span<const Cell> cells);

}  // namespace wsb
