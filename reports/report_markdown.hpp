#pragma once
// report.md: the document engineers paste into pull requests.
#include <filesystem>
#include <string>

#include "reports/results.hpp"

namespace wsb {

struct ReportOptions {
  std::string title = "wsbench results";  ///< the "# " heading; the matrix name is appended when set
  bool phases = true;                     ///< include the per-cell phase tables
  bool raw = true;                        ///< include the per-trial raw numbers (<details> block)
};

/// Sections, in order: title; "## Context" (key/value table of the context, or one row per host for merged
/// results); "## Summary" (summary_table); "## Fleet means" (host_mean_table, only when cells come from more
/// than one host); "## Failures" (every cell_failures entry with its reason, or "None."); "## Checks" (checks_table) and
/// "## Memory" (memory_table), when any cell has trials; "## Phases" (one
/// phase_table per cell that recorded phases); "## Raw samples" (a collapsed <details> block with, per cell,
/// one row per trial: status, every times_s key in seconds, numeric memory.* and probe.* values, exact).
std::string render_report_markdown(const Results& results, const ReportOptions& options = {});

/// Writes render_report_markdown to `path`. Throws std::runtime_error naming the path when it cannot be written.
void write_report_markdown(const std::filesystem::path& path, const Results& results,
                           const ReportOptions& options = {});

}  // namespace wsb
