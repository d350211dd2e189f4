#pragma once
// Whether a cell passed, and why not: the Checks column and the report's list of failures.
#include <optional>
#include <string>
#include <vector>

#include "reports/results.hpp"

namespace wsb {

/// Outcome of a cell as reported. A cell counts as failed when its status is "fail", or when any trial failed
/// or any check did not pass — a report never shows "pass" next to a failed check.
struct CellVerdict {
  Status status = Status::Pass;
  std::string reason;  ///< first reason found (empty for pass)
};

/// The first reason is, in order: the cell's reason, the first failed trial's reason, the first failed check as
/// "<name>: <detail>" (or just "<name>"), else "no reason recorded". A skipped cell gives its own reason.
CellVerdict cell_verdict(const Cell& cell);

/// "pass", "FAIL: <reason>", "skipped: <reason>" ("skipped" when it has no reason).
std::string verdict_text(const CellVerdict& verdict);

/// One failure to list in a report.
struct Failure {
  std::string cell_id;
  std::string host;
  std::optional<int64_t> trial;  ///< trial index; nullopt for a failure of the cell itself
  std::string what;              ///< check name, or "trial failed" / "cell failed"
  std::string detail;            ///< check detail or reason
};

/// Every failure of the cell in order: the cell's own (status fail with a reason), then per trial its own failure
/// (status fail) and each failed check. Skipped cells give none.
std::vector<Failure> cell_failures(const Cell& cell);

}  // namespace wsb
