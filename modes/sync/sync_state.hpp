#pragma once
// The prepare/commit state machine shared by every sync mode (DESIGN.md "Sync modes"; the rules of the
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

/// Thread-safe. Rules: prepare is rejected (Error(State)) while staging is off or another prepare is pending;
/// target == prepared is an idempotent success; target < prepared or target <= served is rejected; target >
/// prepared discards the prepared one. Commit is rejected while a prepare is pending and unless prepared ==
/// target. Served version moves only in finish_commit.
class SyncStateMachine {
 public:
  explicit SyncStateMachine(uint32_t served) : served_(served) {}

  void set_staging_enabled(bool enabled);
  /// Throws Error(State) with the rule that refused it.
  PrepareAction begin_prepare(uint32_t target);
  /// Ends a Build started by begin_prepare; on success `target` becomes the prepared version.
  void finish_prepare(uint32_t target, bool ok);
  /// Throws Error(State) when a prepare is pending or nothing / another version is prepared.
  void check_commit(uint32_t target) const;
  /// Served version := target; prepared cleared.
  void finish_commit(uint32_t target);

  uint32_t served() const;
  std::optional<uint32_t> prepared() const;
  bool preparing() const;

 private:
  mutable std::mutex mu_;
  uint32_t served_;
  std::optional<uint32_t> prepared_;
  bool preparing_ = false;
  bool staging_enabled_ = true;
};

}  // namespace wsb
