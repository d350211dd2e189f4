#pragma once
// The profiler: runs one matrix cell as named stages (publish -> reference -> floors -> trials) against fresh engines
// and checks every update exactly (fingerprints before/during/after, per-rank checksums against a native load,
// storage pointers, version, missing-target rejection). The judgements are harness/verify.hpp's, the timed trial
// harness/trial.hpp's; the result is the results schema's Cell (reports/results.hpp).
#include <filesystem>

#include "harness/matrix.hpp"
#include "reports/results.hpp"

namespace wsb {

struct CellRunOptions {
  std::filesystem::path profiles_dir;
  std::filesystem::path workdir;  ///< emptied first; holds the store, the reference checkpoint, trial dirs
  bool keep_workdir = false;
  std::filesystem::path progress_file = {};  ///< where the cell reports its trial and phase (ProgressFile); empty: nowhere
  /// http cells: the runtime launcher every server is started through (the cell's `runtime`).
  Launcher launcher = builtin_launchers().at("native");
  /// http cells: the wsbench executable of the default server command ({self}); empty: this process's executable.
  std::filesystem::path self = {};
};

/// Runs every trial of `cell` and returns its results record (written by reports/results_json.hpp):
/// status Pass only when every check of every trial passed. Setup errors (unknown profile, publish failure)
/// produce status "fail" with the reason; they do not throw. `runtime_detected` is the runtime the cell process
/// actually runs in (detect_host_runtime); a cell whose launcher is "gvisor" fails unless that is "gvisor" (http cells:
/// the cell process is the client and runs natively; the servers are started through `options.launcher`).
/// An http trial whose server fails (no answer, an error status, a malformed body, a version going backwards, never
/// healthy, dying mid-commit) is a failed trial with the endpoint and the problem as reason; the cell goes on.
Cell run_cell(const MatrixCell& cell, const CellRunOptions& options);

}  // namespace wsb
