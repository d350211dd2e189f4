#pragma once
// The results schema written by the harness (results.json) and read by every report command.
// Field names follow the schema agreed with the harness (docs/design.md "Reports"); schema_version 1.
// Every struct keeps the JSON keys it does not know in `extra`, so a file written by a newer harness or by
// another engine adapter survives load -> save unchanged.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sync_options.hpp"

namespace wsb {

/// The only results.json schema version this code reads and writes.
inline constexpr int kResultsSchemaVersion = 1;

/// The checks a trial records (Check::name), in the order the profiler judges them (harness/verify.hpp).
namespace check_names {
inline constexpr const char* kFreshEnginesAgree = "fresh_engines_agree";
inline constexpr const char* kUpdateChangesFingerprint = "update_changes_fingerprint";
/// In its place for identity updates (density 0): the target answers the probe exactly as v0.
inline constexpr const char* kIdentityKeepsFingerprint = "identity_keeps_fingerprint";
inline constexpr const char* kUpdateSucceeds = "update_succeeds";
inline constexpr const char* kProbesExact = "probes_exact";
inline constexpr const char* kGenerationDuringPrepare = "generation_during_prepare";
inline constexpr const char* kProbesAfterCommit = "probes_after_commit";
inline constexpr const char* kVersionIsTarget = "version_is_target";
inline constexpr const char* kChecksumsEqualNativeLoad = "checksums_equal_native_load";
inline constexpr const char* kStoragePointersUnchanged = "storage_pointers_unchanged";
inline constexpr const char* kMissingTargetRejected = "missing_target_rejected";
inline constexpr const char* kEngineAnswers = "engine_answers";
}  // namespace check_names

/// The keys of Trial::times_s, seconds.
namespace time_keys {
inline constexpr const char* kNativeLoad = "native_load";  ///< the trial's boot (native load of v0)
inline constexpr const char* kPrepare = "prepare";         ///< the prepare call
inline constexpr const char* kCommit = "commit";           ///< the commit call as the client timed it
inline constexpr const char* kPause = "pause";             ///< scheduler gate closed (the engine's report; absent
                                                          ///< when the engine measures none)
inline constexpr const char* kPauseBound = "pause_bound";  ///< the commit call(s) as the client timed them: the
                                                          ///< pause's upper bound
inline constexpr const char* kEnvelope = "envelope";       ///< prepare start -> first response at the target
inline constexpr const char* kMaxStall = "max_stall";      ///< largest gap between decode steps the client saw
inline constexpr const char* kCuptiOverhead = "cupti_overhead";  ///< pause time spent starting/stopping CUPTI
}  // namespace time_keys

/// Outcome of a cell ("pass" | "fail" | "skipped") or of a trial ("pass" | "fail").
enum class Status { Pass, Fail, Skipped };

/// Where a results file was measured. Only `host` is required in JSON; the rest defaults to empty / 0.
struct Context {
  std::string host;              ///< hostname; the unit of the cross-host statistics
  std::string cpu_model;
  int64_t cpu_cores = 0;
  uint64_t memory_bytes = 0;     ///< total host RAM, bytes
  std::string kernel;            ///< uname -r
  std::string os;
  std::string runtime_detected;  ///< bare | container | gvisor | firecracker | ...
  std::string build_commit;
  std::string build_type;
  std::string date_utc;          ///< ISO 8601
  nlohmann::json gpus = nlohmann::json::array();    ///< free-form per-GPU entries (strings or objects)
  nlohmann::json extra = nlohmann::json::object();  ///< free-form keys (driver, CUDA, engine pin, ...)
  bool operator==(const Context&) const = default;
};

/// Physics floors measured in the same run, GB/s with GB = 1e9 bytes.
/// A phase's `floor` name X refers to the field "X_gbps" (typed below, or any other key kept in `extra`).
struct Floors {
  double host_memcpy_gbps = 0;
  double disk_read_gbps = 0;
  std::optional<double> h2d_gbps;  ///< absent on hosts without a GPU
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Floors&) const = default;
};

/// Sizes of the model under test, bytes.
struct Bytes {
  uint64_t canonical = 0;                    ///< canonical checkpoint
  std::vector<uint64_t> rank_image_per_rank; ///< cpu mode rank images, one per TP rank (empty otherwise)
  std::optional<uint64_t> delta_compressed;  ///< compressed delta publication, when one was applied
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Bytes&) const = default;
};

/// One timed stage of a trial ("prepare.stage", "commit.h2d", ...).
struct Phase {
  std::string name;
  double seconds = 0;
  uint64_t bytes = 0;  ///< bytes moved by the stage; 0 when it moves none
  std::string floor;   ///< "disk_read" | "host_memcpy" | "h2d" | "" (no floor applies)
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Phase&) const = default;
};

/// One correctness property checked in a trial.
struct Check {
  std::string name;
  bool pass = false;
  std::string detail;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Check&) const = default;
};

/// One update measured in a fresh engine. `times_s` keys include prepare, commit, pause, envelope, max_stall,
/// native_load; any other key is kept.
struct Trial {
  int64_t index = 0;
  Status status = Status::Pass;  ///< Pass or Fail
  std::string reason;
  std::map<std::string, double> times_s;  ///< seconds
  std::vector<Phase> phases;
  std::vector<Check> checks;
  nlohmann::json memory = nlohmann::json::object();  ///< rss_peak_bytes, ... (free-form numbers)
  nlohmann::json probe = nlohmann::json::object();   ///< responses, ... (free-form)
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Trial&) const = default;
};

/// One matrix cell: model x mode x runtime x engine x tp, run n times on one host.
struct Cell {
  std::string id;  ///< e.g. "llama-tiny-bf16/disk/native/tp2"
  std::string model;
  /// Sync mode and settings: JSON fields mode, commit_strategy, delta_staging_bytes, transport, bucket_bytes,
  /// base_gpu_id (core/sync_options.hpp write_sync_fields).
  SyncOptions sync;
  std::string runtime;  ///< native | gvisor | user launcher name
  std::string engine;   ///< embedded-cpu | ...
  std::string protocol;  ///< http engines: the weight-update API (sglang, vllm, ...); empty for embedded ones
  std::optional<PauseMode> pause_mode;  ///< as the cell named it; nullopt: the protocol's or engine's default
  int64_t tp = 1;
  int64_t n = 0;  ///< trials requested
  Status status = Status::Pass;
  std::string reason;
  std::string host;  ///< when absent in JSON, the file's context.host
  std::optional<Floors> floors;
  std::optional<Bytes> bytes;
  std::vector<Trial> trials;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Cell&) const = default;
  /// The mode as tables and comparisons name it (SyncOptions::label): "cpu+device-delta", "refit+shm", so the
  /// strategies of one model are never averaged together.
  std::string mode_label() const { return cell_mode_label(sync, protocol, pause_mode); }
};

/// A whole results.json: one host's run, or several merged (then `hosts` lists each host's context).
struct Results {
  int64_t schema_version = kResultsSchemaVersion;
  std::string tool = "wsbench";
  Context context;
  std::vector<Context> hosts;  ///< filled by merge; empty for a single-host file
  std::string matrix;
  std::vector<Cell> cells;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Results&) const = default;
};

/// "pass" | "fail" | "skipped".
const char* status_name(Status status);

}  // namespace wsb
