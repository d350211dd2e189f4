#pragma once
// The checks of one trial, each a named judgement over what the trial observed (fingerprints, probe responses,
// checksums, pointers, versions), kept apart from the timing code: nothing here reads a clock or talks to an
// engine. Each returns a results Check (reports/results.hpp, names in `check_names`) whose detail says what was
// seen; the trial's reason is its first failed check.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "harness/probe.hpp"
#include "reports/results.hpp"

namespace wsb {

/// Per rank: runtime storage name -> xxh3-128 hex (EngineClient::storage_checksums).
using Checksums = std::vector<std::map<std::string, std::string>>;

/// A trial's checks in the order they were judged; the first failure is the trial's reason.
class CheckList {
 public:
  void add(Check check);
  /// A check the engine cannot be asked for: recorded as passed with "skipped": true and the reason.
  void skip(const char* name, const std::string& why);
  bool passed() const { return reason_.empty(); }
  /// "<name>: <detail>" of the first failed check; empty when all passed.
  const std::string& reason() const { return reason_; }
  const std::vector<Check>& checks() const { return checks_; }

 private:
  std::vector<Check> checks_;
  std::string reason_;
};

/// "" when the maps are equal, else the first three differing storages ("rank 1 'w'", "rank 0 storage count") and
/// "... N in all".
std::string checksum_diff(const Checksums& actual, const Checksums& expected);
/// "" when every storage kept its address and size, else the first one that moved.
std::string pointer_diff(const std::vector<std::vector<StoragePointer>>& before,
                         const std::vector<std::vector<StoragePointer>>& after);

/// The window of one update as the client saw it (steady_seconds(); 0 where the update did not get there).
struct UpdateWindow {
  double prepare_start = 0, prepare_end = 0;
  double commit_start = 0, commit_end = 0;
};

/// What the probe traffic of one trial showed, response by response.
struct ProbeTally {
  int responses = 0;
  int before_commit = 0;   ///< received before the commit call started
  int during_prepare = 0;  ///< received inside the prepare window
  int after_commit = 0;    ///< sent after the commit call returned
  int errors = 0;
  int wrong = 0;           ///< at a version with another fingerprint, or at the wrong version for its time
  int restarts = 0;        ///< requests the engine restarted across the commit (wsbench_restarts)
  int aborted = 0;         ///< requests an abort pause ended early (finish_reason "abort"; not judged further)
  /// responses whose steps span two weight versions (an in_place pause), or that were in flight across the commit
  /// of an engine reporting no step versions when the cell accepts mixed responses
  int mixed = 0;
  std::string first_wrong; ///< what the first wrong or failed response was
  double first_target = -1;  ///< receive time of the first response at the target version, -1 if none
};

/// What the cell allows of its probe responses.
struct ProbeExpectation {
  std::string fp0;        ///< the fingerprint of `from` (v0 unless the cell updates more than once)
  uint32_t target = 0;
  std::string target_fp;  ///< the target's fingerprint (a fresh native load's)
  /// A response whose tokens span two versions is counted (mixed) but not wrong; its fingerprint is not judged.
  bool accept_mixed = false;
  uint32_t from = 0;  ///< the version served before the update (a cell's earlier updates went to it)
};

/// Judges every response: it must carry `from` with `fp0` or `target` with `target_fp`, `from` before the commit and
/// the target after it. A response whose token versions differ (in_place) is wrong unless the cell accepts mixed
/// responses; an aborted one is counted and its (partial) fingerprint not judged.
ProbeTally tally_probes(const std::vector<ProbeSample>& samples, const UpdateWindow& window,
                        const ProbeExpectation& expect);

/// fresh_engines_agree: this trial's v0 fingerprint equals the previous trial's.
Check check_fresh_engines_agree(const std::string& fp0, const std::string& previous);
/// update_changes_fingerprint: `from` (v0 by default) and the target answer the probe differently (else the probes
/// prove nothing). With `identity` (the cell publishes density-0 deltas, which change no value) it is
/// identity_keeps_fingerprint instead: both answer the probe the same.
Check check_update_changes_fingerprint(const std::string& fp0, const std::string& target_fp, uint32_t from = 0,
                                       bool identity = false);
/// update_succeeds: prepare and commit returned (`error` is what they threw, empty if nothing).
Check check_update_succeeds(const std::string& error);
/// probes_exact: no response failed or was wrong (tally_probes).
Check check_probes_exact(const ProbeTally& tally);
/// generation_during_prepare: decode steps ended inside the prepare window, unless the window was shorter than a
/// few scheduler time slices or three median decode steps (a busy host may run only prepare's threads that long).
/// Fails, saying so, when the prepare did not return (window.prepare_end == 0), and when the update failed after
/// the prepare returned (`update_ok` false: the commit threw).
Check check_generation_during_prepare(const std::vector<ProbeSample>& samples, const UpdateWindow& window,
                                      bool update_ok, int responses_during_prepare);
/// probes_after_commit: at least one response was sent after the commit returned.
Check check_probes_after_commit(const ProbeTally& tally);
/// version_is_target: the served version after commit.
Check check_version_is_target(uint32_t served, uint32_t target);
/// checksums_equal_native_load: every rank's storage checksums equal a fresh native load of the target.
Check check_checksums_equal_native_load(const Checksums& actual, const Checksums& native, uint32_t target);
/// storage_pointers_unchanged: every storage kept its address and size across the update.
Check check_storage_pointers_unchanged(const std::vector<std::vector<StoragePointer>>& before,
                                       const std::vector<std::vector<StoragePointer>>& after);

/// What a prepare of a never-published version did, and the engine's state afterwards.
struct MissingTargetOutcome {
  uint32_t missing = 0;
  bool accepted = false;                 ///< the prepare returned
  std::optional<ErrorKind> kind;         ///< the rejection's kind
  std::string message;                   ///< the rejection's text
  bool engine_reports_kinds = true;      ///< EngineClient::reports_error_kinds
  bool unchanged = false;                ///< version, checksums and fingerprint as before the prepare
};
/// missing_target_rejected: rejected as Missing (any rejection from an engine whose errors carry no kind) and
/// nothing changed.
Check check_missing_target_rejected(const MissingTargetOutcome& outcome);

/// engine_answers: the trial stopped because the engine stopped answering (`error`).
Check check_engine_answers(const std::string& error);

}  // namespace wsb
