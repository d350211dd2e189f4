#pragma once
// What `wsbench` prints at the end of a run: aligned plain-text tables for a terminal.
#include <string>

#include "reports/results.hpp"

namespace wsb {

/// The summary table; the fleet-means table when cells come from more than one host; every failure with its
/// reason; with `phases`, one phase table per cell. Section titles are "## ..." lines; tables use render_text.
std::string render_terminal_summary(const Results& results, bool phases = false);

}  // namespace wsb
