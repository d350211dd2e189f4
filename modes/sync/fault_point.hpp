#pragma once
// Fault points: named places inside prepare and commit where a crash or resource test (tests/faults/), or
// `wsbench serve --fault`, makes the process fail at exactly that step. They are compiled into every build and
// inert unless a hook is given explicitly (EngineOptions::fault_hook): an unset hook costs one test per site.
#include <cstddef>
#include <functional>
#include <string_view>

namespace wsb {

enum class FaultPoint {
  /// disk mode prepare: tensor `index` (canonical order) of the target was just written into the new checkpoint
  /// directory beside the verified one (workdir/checkpoint.next); the verified checkpoint and its state file are
  /// untouched, nothing of the new one is fsynced yet.
  DiskCheckpointWrite,
  /// disk mode prepare: the new checkpoint is complete and fsynced, the state file was cleared and the previous
  /// checkpoint moved aside (workdir/checkpoint.old); the new one is not in place yet (no workdir/checkpoint).
  DiskCheckpointSwap,
  /// commit, inside the pause: storage `index` of `rank` was just written (issued) into the live storages.
  CommitStorageWritten,
};

/// "disk.checkpoint_write" | "disk.checkpoint_swap" | "commit.storage_written".
std::string_view fault_point_name(FaultPoint point);

/// One call of a fault hook.
struct FaultSite {
  FaultPoint point = FaultPoint::DiskCheckpointWrite;
  int rank = 0;           ///< CommitStorageWritten: the TP rank; 0 otherwise
  size_t index = 0;       ///< tensor or storage index, as described at the point
  std::string_view name;  ///< that tensor's or storage's name
};

/// Called at every fault site when set. It may return (no fault here), throw (the caller's error path runs: a
/// throw inside commit is fatal for the engine) or never return (a crash test kills the process there).
using FaultHook = std::function<void(const FaultSite&)>;

inline void fault_point(const FaultHook& hook, const FaultSite& site) {
  if (hook) hook(site);
}

}  // namespace wsb
