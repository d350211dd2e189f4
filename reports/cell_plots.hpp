#pragma once
// The plots of `wsbench report table --plots DIR`: per cell the pause and the complete loop next to their floors,
// for a pull request's description.
#include <span>
#include <vector>

#include "reports/plot_files.hpp"
#include "reports/results.hpp"

namespace wsb {

/// Two jobs, stems "pause" and "loop" (times_s.pause, times_s.envelope): x = the cells in order (label = cell id,
/// "\n" + host when the cells come from several hosts), the mean over the cell's trials with a min-max bar, the
/// cell's floor (metric_floor_seconds) as a segment; a logarithmic y axis when the largest mean is over 100 times
/// the smallest.
std::vector<PlotJob> cell_plot_jobs(std::span<const Cell> cells);

}  // namespace wsb
