#pragma once
// Nightly history: results files of several runs ordered by their context block (date, build commit), each
// configuration's metrics as a series over the runs with its floor, and every step up beyond a threshold against
// the previous point flagged as a regression.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reports/config_key.hpp"
#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// One results file of the history.
struct HistoryRun {
  std::string source;        ///< the file, as given
  std::string date_utc;      ///< context.date_utc; for a merged file whose hosts differ, the earliest host's date
  std::string build_commit;  ///< context.build_commit; for a merged file whose hosts differ, theirs joined with "+"
  size_t hosts = 0;          ///< hosts in the file (merged files: `hosts`, else 1)
  std::string matrix;
};

/// One configuration's metric in one run.
struct HistoryPoint {
  size_t run = 0;                    ///< index into History::runs
  size_t hosts = 0;                  ///< hosts that measured the configuration (with a sample, when any has one)
  std::optional<double> mean;        ///< equal-weight mean of host means (group_host_stat), seconds
  std::optional<double> half_width;  ///< its 95% Student-t half-width; nullopt with one host
  std::optional<double> floor;       ///< mean over the configuration's cells of metric_floor_seconds, seconds
  std::optional<double> floor_ratio; ///< mean / floor
  std::optional<double> change;      ///< mean / the mean of the series' previous point that has one
  bool regression = false;           ///< change > 1 + threshold
  bool failed = false;               ///< a cell of the configuration failed (cell_verdict)
};

/// One configuration's metric over the runs that hold the configuration, in run order.
struct HistorySeries {
  ConfigKey key;
  std::string metric;  ///< a history_metric_names() entry
  std::vector<HistoryPoint> points;
};

struct History {
  double threshold = 0.10;
  std::vector<std::string> metrics;
  std::vector<HistoryRun> runs;        ///< ordered by (date_utc, build_commit), then as given
  std::vector<HistorySeries> series;   ///< configurations in order of first appearance over the ordered runs,
                                       ///< then metrics in the order asked for
  /// The series whose newest point is a regression.
  std::vector<const HistorySeries*> newest_regressions() const;
};

/// Builds the history of `results` (sources[i] names results[i]). `metrics`: history_metric_names entries.
/// Throws std::invalid_argument when sizes differ, metrics is empty or names an unknown metric, or the threshold
/// is negative or not finite.
History build_history(std::span<const Results> results, std::span<const std::string> sources,
                      const std::vector<std::string>& metrics, double threshold);

/// "model/mode/runtime/tpN", the configuration's name in history.md and in plot titles.
std::string config_name(const ConfigKey& key);

/// The series as a table: Date | Commit | Hosts | Mean | 95% CI ± | Floor | Ratio to floor | vs previous | Verdict.
/// Date and Commit as recorded; Mean, 95% CI ± (half-width, n/a with one host) and Floor in seconds (units row
/// "(s)"); Ratio to floor = Mean / Floor; vs previous = Mean / the previous measured Mean; Verdict "" or
/// "REGRESSION (1.25x > 1.10x)", then "checks failed" when a cell of the configuration failed ("; "-joined).
Table history_table(const History& history, const HistorySeries& series);

/// Sources table: # | Date | Commit | Hosts | Matrix | File, one row per run in order.
Table history_runs_table(const History& history);

}  // namespace wsb
