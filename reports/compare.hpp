#pragma once
// Baseline vs candidate: per configuration, the candidate/baseline ratio of the mean prepare, commit, pause and
// complete loop (envelope), flagged as a regression beyond a threshold.
#include <optional>
#include <string>
#include <vector>

#include "reports/config_key.hpp"
#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// One metric of one configuration. Means are equal-weight host means (group_host_stat), so a merged fleet
/// file compares host-for-host fairly; with one host they are the plain mean over its trials.
struct CompareMetric {
  std::optional<double> baseline;   ///< seconds
  std::optional<double> candidate;  ///< seconds
  std::optional<double> ratio;      ///< candidate / baseline; nullopt when either is missing or baseline is 0
};

struct CompareRow {
  ConfigKey key;
  CompareMetric prepare;  ///< times_s.prepare
  CompareMetric commit;   ///< times_s.commit
  CompareMetric pause;  ///< times_s.pause
  CompareMetric loop;   ///< times_s.envelope
  bool in_baseline = true;
  bool in_candidate = true;
  bool regression = false;
  std::string verdict;  ///< "ok", "REGRESSION: <why>", "only in baseline", "only in candidate"
};

struct Comparison {
  double threshold = 0;
  std::vector<CompareRow> rows;  ///< baseline configurations in order, then candidate-only ones
  bool regressed = false;        ///< any row is a regression
};

/// Matches cells by (model, mode, runtime, tp) — engine and host are what a comparison may vary. A row regresses
/// when any metric's ratio > 1 + threshold (in the verdict, metrics in the order prepare, commit, pause, loop), or when the candidate fails (cell_verdict) where the baseline passed.
/// A configuration present on one side only is listed but is not a regression. Throws std::invalid_argument
/// for a negative or non-finite threshold.
Comparison compare_results(const Results& baseline, const Results& candidate, double threshold);

/// Why `baseline` and `candidate` measure different things, or nullopt when they can be compared: the sets of
/// configurations (config_key) differ, or a configuration's workload fields differ between the two (the matrix
/// fields kept in Cell::extra: seed, target, publish_versions, encoding, density, layers, experts,
/// prepare_threads, floor_bytes, chunk_bytes, copy_streams; each side's first cell of the configuration). The
/// text names the configuration and the field, e.g. "m/cpu/native/tp2: layers 4 in baseline, 8 in candidate".
std::optional<std::string> configuration_mismatch(const Results& baseline, const Results& candidate);

/// Model | Mode | Runtime | Prepare ratio | Commit ratio | Pause base | Pause cand | Pause ratio | Loop base |
/// Loop cand | Loop ratio | Verdict (durations bare with a "(s)" units row; ratios with 2 decimals).
Table comparison_table(const Comparison& comparison);

}  // namespace wsb
