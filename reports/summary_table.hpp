#pragma once
// The seed-style summary table, one row per cell:
//   Model | Mode | Runtime | n | Pause range | Complete loop range | Checks
// Pause = times_s.pause, Complete loop = times_s.envelope (prepare start -> first response at the target).
#include <span>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// One row per cell in the given order. When the cells come from more than one host a "Host" column follows
/// Runtime (otherwise rows of different hosts could not be told apart), and a "Cell" column with the cell id follows
/// (after Host) when two cells share configuration and host (cells_need_ids). n = trials recorded; ranges over the trials having the key ("n/a" when
/// none); Checks = verdict_text(cell_verdict(cell)). Model gets " tp<N>" only where needed (model_labels).
Table summary_table(std::span<const Cell> cells);

}  // namespace wsb
