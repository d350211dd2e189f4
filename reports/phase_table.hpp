#pragma once
// Per-phase table of one cell:
//   Phase | n | min | median | max | bytes | GB/s | floor | ratio to floor
// with a units row "(s)" under min/median/max and "(GB/s)" under GB/s. ratio to floor = time / floor time
// (>= 1 means slower than physics; see phase_stats.hpp). The floor column shows "<name> <GB/s> GB/s", or
// "<name> (not measured)" when the cell has no value for it, and is empty for phases without a floor.
#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// Rows from phase_stats(cell); bytes/GB/s/ratio are "n/a" where not computable.
Table phase_table(const Cell& cell);

}  // namespace wsb
