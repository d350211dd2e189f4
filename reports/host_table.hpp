#pragma once
// Fleet table, one row per configuration (model, mode, runtime, tp) over every host that measured it:
//   Model | Mode | Runtime | hosts | Pause mean ± 95% CI | Loop mean ± 95% CI
// Means are equal-weight over host means; the CI is the Student-t half-width over host means ("n/a" with one
// host). hosts = distinct hosts with a cell of that configuration.
#include <span>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// Rows in order of first appearance (group_by_config). Pause = times_s.pause, Loop = times_s.envelope.
Table host_mean_table(std::span<const Cell> cells);

}  // namespace wsb
