#pragma once
// Fleet table, one row per configuration (model, mode, runtime, tp) over every host that measured it:
//   Model | Mode | Runtime | Prepare | Commit | Pause upper bound | Envelope | Hosts | Runs
// Each time is "mean ± 95% CI": the equal-weight mean over host means with the Student-t half-width over host
// means ("± n/a" with one host). Prepare = times_s.prepare, Commit = times_s.commit, Pause upper bound =
// times_s.pause (scheduler gate closed -> reopened, which bounds the time no decode step could run), Envelope =
// times_s.envelope. Hosts = distinct hosts with a cell of that configuration; Runs = trials over all of them.
#include <span>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// Rows in order of first appearance (group_by_config).
Table host_mean_table(std::span<const Cell> cells);

}  // namespace wsb
