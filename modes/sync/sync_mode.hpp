#pragma once
// A weight-sync mode: how the target version is built during prepare and made live during commit.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "core/sync_options.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "core/phase_log.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "publication/store.hpp"
#include "modes/sync/fault_point.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/storage_target.hpp"

namespace wsb::refit {
class DeviceIpc;  // modes/refit/device_ipc.hpp
}  // namespace wsb::refit

namespace wsb {

/// What a mode needs from the engine that owns it.
struct SyncContext {
  ModelProfile profile;
  std::vector<RankLayout> layouts;     ///< one per TP rank
  std::filesystem::path store;         ///< publication store
  std::filesystem::path workdir;       ///< mode-private files (disk mode's mutable checkpoint)
  int threads = 2;                     ///< prepare worker threads
  /// Pins rank images and commit staging (CUDA backend); null on the CPU backend. Must outlive the mode.
  const HostPinner* pinner = nullptr;
  /// The mode and its settings (cpu: commit strategy; refit: transport, bucket size, base GPU id).
  SyncOptions sync{};
  /// The live storages the engine commits into, for what prepare may do where they live without mutating them
  /// (device-delta: digests of the live bytes, staging the delta). Null when the engine gives none.
  StorageTarget* live = nullptr;
  /// refit mode, transport "cuda-ipc": device memory export/import (the CUDA backend's, engine/cuda/cuda_ipc.hpp;
  /// null on the CPU backend, which refuses the transport), the local GPU of each TP rank and the `wsbench`
  /// executable its sender process runs (empty: searched).
  const refit::DeviceIpc* device_ipc = nullptr;
  std::vector<int> rank_devices{};
  std::filesystem::path refit_sender_exe{};
  /// Crash and resource tests only (modes/sync/fault_point.hpp): called at every fault site; empty in production.
  FaultHook fault_hook{};
};

/// Host memory a mode holds between updates, in bytes (canonical image, rank images, staging).
struct ModeMemory {
  uint64_t canonical_bytes = 0;
  uint64_t rank_image_bytes = 0;
  uint64_t staging_bytes = 0;
};

/// Every mode prepares and commits every storage (no sparsity assumption). prepare() must never touch live
/// storages and must leave the mode consistent when it throws; commit() is the only mutation of live storages.
class SyncMode {
 public:
  virtual ~SyncMode() = default;
  virtual std::string_view name() const = 0;
  /// Called after the engine's native load of `checkpoint` at `version` (the served version from then on).
  virtual void on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) = 0;
  /// Builds `target` while the engine keeps serving. Throws wsb::Error (Missing when the target is not
  /// published, Lineage/Format/Checksum/Truncated/Mismatch naming the tensor). `served` is the live version.
  /// Everything that can be checked without mutating (source present, lineage, tensor set) is checked before the
  /// previously prepared artefacts are touched, so such a rejection leaves prepared_version() as it was.
  virtual void prepare(uint32_t served, uint32_t target, PhaseLog& log) = 0;
  /// The version whose artefacts are complete and verified, if any.
  virtual std::optional<uint32_t> prepared_version() const = 0;
  /// Checks the prepared artefacts are complete for `target`; mutates nothing. Throws Error(State).
  virtual void preflight(uint32_t target) const = 0;
  /// Copies the prepared version into the live storages (the pause). A throw here is fatal for the engine.
  virtual void commit(StorageTarget& storages, PhaseLog& log) = 0;
  virtual ModeMemory memory() const = 0;
  /// Blocks until work the mode left running after its last commit is over (none by default; disk mode removes
  /// the checkpoint its swap replaced in the background). Callers that read the process's resources (open files,
  /// page cache) call it first. Safe from any thread; never throws.
  virtual void settle() {}
  /// Pinned host memory the native load may stage storage `index` of `rank` in before its H2D copy (bytes of that
  /// storage), so a device load needs no staging of its own; empty when the mode has none. Only called before
  /// on_native_load, outside any prepare or commit: the mode rebuilds or overwrites that memory before using it.
  virtual std::span<uint8_t> native_load_staging(int rank, size_t index, uint64_t bytes) {
    (void)rank, (void)index, (void)bytes;
    return {};
  }
};

}  // namespace wsb
