#pragma once
// One trial of a cell: a fresh engine at v0, probe traffic through prepare and commit of the target, then the
// checks (harness/verify.hpp). This file times and observes; the judgements live in verify.
#include <filesystem>
#include <string>

#include "engine_api/engine_client.hpp"
#include "harness/matrix.hpp"
#include "harness/progress.hpp"
#include "harness/verify.hpp"
#include "reports/results.hpp"

namespace wsb {

/// What every update of a cell must equal: a fresh engine's native load of the target's FULL checkpoint.
struct Reference {
  std::string fingerprint;  ///< of the probe request (probe_request)
  Checksums checksums;      ///< per rank
  double native_load_s = 0;
};

/// What the trials of one cell share.
struct TrialSetup {
  const MatrixCell& cell;
  EngineLaunch launch;           ///< options.workdir is the cell's; trial i boots under <workdir>/trial-<i>
  std::filesystem::path v0_dir;  ///< FULL v0 in the store: every trial's boot
  Reference target;
  const ProgressFile& progress;
  /// Keep each trial's workdir (a disk-mode checkpoint is the model's size) after the trial ends.
  bool keep_workdir = false;
};

/// Runs trial `index`: boots a fresh engine at v0, updates it to the cell's target while the probe client runs,
/// and records times_s (time_keys), phases, memory, the probe tally, the timeline and every check. Never throws:
/// an engine that stops answering is a failed `engine_answers` check. `previous_v0_fingerprint` is the previous
/// trial's v0 fingerprint (empty for the first) and is set to this one's.
Trial run_trial(int index, const TrialSetup& setup, std::string& previous_v0_fingerprint);

}  // namespace wsb
