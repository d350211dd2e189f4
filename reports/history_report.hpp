#pragma once
// `wsbench report history`'s output folder: history.md (sources, regressions, per configuration and metric a table
// and its plot) and the plots' files.
#include <filesystem>
#include <string>
#include <vector>

#include "reports/history.hpp"
#include "reports/plot_files.hpp"

namespace wsb {

/// The plot of one series: x = its points (label "<date>\n<commit>", the date's first 10 characters and the commit
/// up to its first space, at most 12 characters), mean with its 95% CI bar, the floor as a dashed line,
/// regressions circled; title "<config_name>: <metric>", y from 0.
Plot history_plot(const History& history, const HistorySeries& series);

/// One PlotJob per series, in series order, stems plot_file_stem("<config_name>-<metric>") made unique by a
/// "-2", "-3", ... suffix.
std::vector<PlotJob> history_plot_jobs(const History& history);

/// history.md: title, the sources table (history_runs_table), the definitions, the regressions of each series'
/// newest point ("None." when none), then per configuration a "## `<config_name>`" section with per metric
/// "### <metric>", the plot image when `drawn` holds its stem (jobs[i] belongs to series i), and
/// history_table. `plot_note` (may be empty) is a paragraph after the definitions, e.g. why there are no plots.
std::string render_history_markdown(const History& history, const std::vector<PlotJob>& jobs,
                                     const std::vector<std::string>& drawn, const std::string& plot_note);

}  // namespace wsb
