#pragma once
// The sync options of one engine: the mode and the mode's own settings. Parsed once (a matrix cell, `wsbench serve`
// flags, a results file) and carried as this one record through the engine launch, the engine options and the sync
// context. The name tables below are the only spelling of each value: matrix fields, serve flags, results fields,
// ids and table labels all use them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/pause_mode.hpp"

namespace wsb {

/// The sync modes (modes/registry builds them): disk reload, cpu-prepared commit, streamed refit.
enum class SyncModeKind { Disk, Cpu, Refit };
/// cpu mode's commit strategies: copy every rank image in the pause, or only the staged differences
/// (modes/sync/staged_delta.hpp).
enum class CommitStrategy { Full, DeviceDelta };
/// refit mode's transports between the trainer simulator and the receivers (modes/refit/refit_link.hpp).
enum class RefitTransport { Inproc, Shm, CudaIpc };

/// cpu mode settings.
struct CpuSyncOptions {
  CommitStrategy commit_strategy = CommitStrategy::Full;
  /// device-delta staging area per device, bytes (0: the engine's default: 1/16 of the device's memory, or on the
  /// cpu backend a quarter of the storage bytes).
  uint64_t delta_staging_bytes = 0;
  bool operator==(const CpuSyncOptions&) const = default;
};

/// refit mode settings.
struct RefitSyncOptions {
  RefitTransport transport = RefitTransport::Inproc;
  /// Bucket size both sides use, bytes (0: the largest shard rounded up to 1 MiB, at least 64 MiB, at most one rank's whole
  /// stream rounded up to 1 MiB).
  uint64_t bucket_bytes = 0;
  /// cuda-ipc: the host GPU id of the engine's local GPU 0 (SGLang's --base-gpu-id).
  int base_gpu_id = 0;
  bool operator==(const RefitSyncOptions&) const = default;
};

struct SyncOptions {
  SyncModeKind mode = SyncModeKind::Cpu;
  CpuSyncOptions cpu{};      ///< read by mode cpu only
  RefitSyncOptions refit{};  ///< read by mode refit only
  bool operator==(const SyncOptions&) const = default;

  /// The mode as cell ids, tables and comparisons name it: "disk", "cpu", "cpu+device-delta", "refit+shm" (the
  /// refit's transport always; a commit strategy other than full), so configurations are never averaged together.
  std::string label() const;
  /// Throws Error(Format) "`where`: field 'F' ..." when a setting of another mode differs from its default
  /// (commit_strategy/delta_staging_bytes outside cpu, transport/bucket_bytes outside refit, base_gpu_id outside
  /// cuda-ipc) or base_gpu_id < 0.
  void validate(const std::string& where) const;
};

/// "disk", "cpu", "refit" (enum order).
const std::vector<std::string>& sync_mode_names();
/// "full", "device-delta" (enum order).
const std::vector<std::string>& commit_strategy_names();
/// "inproc", "shm", "cuda-ipc" (enum order).
const std::vector<std::string>& refit_transport_names();

const std::string& name_of(SyncModeKind mode);
const std::string& name_of(CommitStrategy strategy);
const std::string& name_of(RefitTransport transport);

/// Each throws Error(Format) "unknown mode 'X' (disk, cpu, refit)" (likewise "unknown strategy", "unknown transport").
SyncModeKind parse_sync_mode(std::string_view name);
CommitStrategy parse_commit_strategy(std::string_view name);
RefitTransport parse_refit_transport(std::string_view name);

/// The JSON keys of the sync options in matrices and results: mode, commit_strategy, delta_staging_bytes, transport,
/// bucket_bytes, base_gpu_id.
const std::vector<std::string>& sync_field_names();

/// Writes the keys that apply to `options.mode` into the object `j`: mode; cpu: commit_strategy when not full and
/// delta_staging_bytes when set; refit: transport, bucket_bytes, and base_gpu_id for cuda-ipc.
void write_sync_fields(const SyncOptions& options, nlohmann::json& j);
/// Reads the sync keys present in the object `j` over `options` (absent keys keep their value). Throws
/// Error(Format) "`where`: field 'F' ..." for a wrong type, a negative or out-of-range number or an unknown name.
void read_sync_fields(const nlohmann::json& j, SyncOptions& options, const std::string& where = "sync options");

/// The mode of a cell as ids, tables and comparisons name it: the sync label, "@protocol" for an engine driven over
/// HTTP (empty `protocol`: embedded), ":pause_mode" when the cell names one ("disk@sglang:in_place",
/// "cpu+device-delta", "disk:abort"), so cells that differ in any of them are never averaged together.
std::string cell_mode_label(const SyncOptions& sync, std::string_view protocol, std::optional<PauseMode> pause);

}  // namespace wsb
