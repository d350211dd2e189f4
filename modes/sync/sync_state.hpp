#pragma once
// The prepare/commit state machine shared by every sync mode (docs/design.md "Sync modes"; the rules of the
// SGLang-fork's /prepare_weight_update and /commit_weight_update).
#include <cstdint>
#include <mutex>
#include <optional>

namespace wsb {

/// What a prepare call must do.
enum class PrepareAction {
  Build,            ///< build the target (a previously prepared version, if any, is discarded)
  AlreadyPrepared,  ///< target == prepared: idempotent success, nothing to do
};

/// What begin_prepare decided, with the served version it decided against.
struct PrepareTicket {
  PrepareAction action = PrepareAction::Build;
  uint32_t served = 0;
};

/// Thread-safe. Rules: prepare is rejected (Error(State)) while staging is off, another prepare is pending or a
/// commit is in progress; target == prepared is an idempotent success; target < prepared or target <= served is
/// rejected; target > prepared replaces the prepared one once the new build starts mutating (a prepare rejected
/// before that — e.g. a missing source — leaves the prepared version usable). Commit is rejected while a prepare
/// is pending, while another commit runs, and unless prepared == target. Served version moves only in
/// finish_commit.
class SyncStateMachine {
 public:
  explicit SyncStateMachine(uint32_t served) : served_(served) {}

  void set_staging_enabled(bool enabled);
  /// Throws Error(State) with the rule that refused it.
  PrepareTicket begin_prepare(uint32_t target);
  /// Ends a Build started by begin_prepare. On success `target` becomes the prepared version; on failure the
  /// prepared version becomes `still_prepared` (what the mode still holds intact, usually the previous one).
  void finish_prepare(uint32_t target, bool ok, std::optional<uint32_t> still_prepared);
  /// Starts a commit. Throws Error(State) when a prepare is pending, a commit runs, or nothing / another version
  /// is prepared. Until finish_commit, prepares are refused.
  void begin_commit(uint32_t target);
  /// Ends a commit: on success served := target and prepared cleared; on failure only the commit ends (the engine
  /// stops serving).
  void finish_commit(uint32_t target, bool ok);

  uint32_t served() const;
  std::optional<uint32_t> prepared() const;
  bool preparing() const;

 private:
  mutable std::mutex mu_;
  uint32_t served_;
  std::optional<uint32_t> prepared_;
  bool preparing_ = false;
  bool committing_ = false;
  bool staging_enabled_ = true;
};

}  // namespace wsb
