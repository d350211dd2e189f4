#pragma once
// The embedded reference engine: TP ranks, runtime storages allocated once, a scheduler loop with a pause gate,
// deterministic greedy decoding with logprobs, per-storage content hashes and pointer reports, weight version,
// and the prepare/commit state machine driving one sync mode.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/generation.hpp"
#include "engine/cuda/cupti_tracer.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/host_storages.hpp"
#include "engine/kernels/device_forward.hpp"
#include "core/pause_mode.hpp"
#include "core/phase_log.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/sync/sync_mode.hpp"
#include "modes/sync/sync_state.hpp"

namespace wsb {

class DeviceTransformTarget;

struct EngineOptions {
  ModelProfile profile;
  int tp = 1;
  SyncOptions sync{};               ///< sync mode and its settings (core/sync_options.hpp)
  std::filesystem::path store;      ///< publication store the mode reads
  std::filesystem::path workdir;    ///< mode-private files
  int prepare_threads = 2;
  /// "cpu": storages in host memory, reference forward on the host. "cuda": storages in device memory
  /// (engine/cuda/device_storages.hpp), device forward with captured graphs, rank images and staging pinned.
  std::string backend = "cpu";
  DeviceStorageOptions device{};   ///< cuda backend only
  DeviceForwardOptions forward{};  ///< cuda backend only
  /// cuda backend only: collect CUPTI memcpy/kernel activity inside every commit's pause (CommitReport::cupti).
  /// Off under Nsight Systems (CUPTI allows one subscriber) or with WSBENCH_CUPTI=0.
  bool cupti = false;
  /// refit cuda-ipc: device memory export/import in place of the backend's (null: the cuda backend's
  /// cuda_device_ipc, none on the cpu backend). Tests give the host stand-in (modes/refit/host_device_ipc.hpp) to
  /// run the whole cuda-ipc path on the cpu backend, every rank on "GPU" 0.
  const refit::DeviceIpc* refit_device_ipc = nullptr;
  /// Crash and resource tests, and `wsbench serve --fault`, only: called at every fault site of prepare and commit
  /// (modes/sync/fault_point.hpp). A throw at a commit site is fatal for the engine, as any failure after mutation.
  FaultHook fault_hook{};
};

/// Result of a native load (boot).
struct LoadReport {
  uint32_t version = 0;
  double seconds = 0;
  uint64_t bytes = 0;  ///< runtime storage bytes written, all ranks
  std::vector<PhaseRecord> phases;
};

struct PrepareReport {
  uint32_t target = 0;
  bool already_prepared = false;  ///< idempotent repeat of a prepared target
  double seconds = 0;
  std::vector<PhaseRecord> phases;
};

struct CommitReport {
  uint32_t target = 0;
  double seconds = 0;  ///< whole commit call (preflight, gate wait, copy, reopen), as its caller timed it
  /// Scheduler gate closed -> reopened, as the engine measured it; nullopt when nobody measured it (a real server
  /// reports no pause: the commit call's duration is then only its upper bound, never a pause of 0).
  std::optional<double> pause_seconds;
  std::vector<PhaseRecord> phases;
  /// What CUPTI saw between gate close and the last copy landing (enabled = false, with the reason, when off).
  CuptiSummary cupti;
  /// Seconds of the pause spent starting and stopping the CUPTI tracer (0 when off).
  double cupti_overhead_seconds = 0;
};

/// Identity of one runtime storage (address, size) — captured CUDA graphs depend on it never changing.
struct StoragePointer {
  std::string name;
  uintptr_t address = 0;
  uint64_t bytes = 0;
  bool operator==(const StoragePointer&) const = default;
};

class Engine {
 public:
  /// Allocates every runtime storage once and starts the scheduler. Throws Error for invalid profile/tp/mode/
  /// backend (Format naming it), Error(Resource) when the cuda backend lacks a device or device memory.
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Native load of a FULL checkpoint directory into the storages; `version` becomes the served version. Boot
  /// only: generation is refused until it returns, and a second call throws Error(State).
  /// Throws Error (Mismatch naming the tensor when shapes/dtypes differ from the profile, Format/Missing; Resource
  /// when the device-delta commit's staging area cannot be allocated).
  LoadReport load_native(const std::filesystem::path& checkpoint_dir, uint32_t version);

  /// Blocks until the request finished. Throws Error(Fatal) when the engine stopped serving.
  GenerateResponse generate(const GenerateRequest& request);

  /// Builds `target` while generation continues. Throws Error (State per the state machine, or the mode's
  /// errors); on a throw the served version and storages are unchanged.
  PrepareReport prepare(uint32_t target);

  /// Makes the prepared `target` live inside the pause. Throws Error(State) before the pause when the state
  /// machine or the mode's preflight refuses; Error(Fatal) when the copy failed midway (the engine then stops
  /// serving rather than serve mixed weights). `pause` says what happens to requests in flight
  /// (core/pause_mode.hpp); while the engine is paused by pause(), the pause's own mode applies instead and the
  /// gate stays closed after the commit (resume() opens it).
  CommitReport commit(uint32_t target, PauseMode pause = PauseMode::Retract);

  /// Replaces every runtime storage from the FULL checkpoint `checkpoint_dir` (a reload, as SGLang's
  /// /update_weights_from_disk) inside a pause of mode `pause`, and serves it as `version`. Bypasses the sync
  /// mode's prepared state (the mode is not told). The checkpoint is checked against the profile first (nothing
  /// changes when a tensor is missing or mis-shaped: Error naming the tensor); a failure while writing stops the
  /// engine (Error(Fatal)).
  CommitReport commit_checkpoint(const std::filesystem::path& checkpoint_dir, uint32_t version,
                                 PauseMode pause = PauseMode::Drain);
  /// As commit_checkpoint, from canonical tensors by name (`lookup` returns the canonical bytes of a name; the
  /// caller checked that every canonical tensor is there with its profile size).
  CommitReport commit_canonical(const CanonicalLookup& lookup, uint32_t version, PauseMode pause);

  /// Closes the scheduler gate now (SGLang's /pause_generation): `abort` ends every request in flight or queued
  /// with finish_reason "abort"; `retract` and `in_place` keep them for after resume() (retract recomputes a
  /// request whose weights changed, in_place continues it on its KV). `drain` waits for the requests in flight to
  /// finish first. Throws Error(State) when already paused.
  void pause(PauseMode mode);
  /// Opens the gate closed by pause(). Returns the seconds it was closed. Throws Error(State) when not paused.
  double resume();
  bool paused() const;

  /// Per rank: storage name -> xxh3-128 hex of its bytes.
  std::vector<std::map<std::string, std::string>> storage_checksums() const;
  /// Per rank, per storage: address and size.
  std::vector<std::vector<StoragePointer>> storage_pointers() const;

  uint32_t weight_version() const { return weight_version_.load(); }
  /// The options the engine was built with (a server's routes read the store and the sync mode it runs).
  const EngineOptions& options() const { return options_; }
  bool healthy() const { return healthy_.load(); }
  const std::vector<RankLayout>& layouts() const { return layouts_; }
  const SyncMode& mode() const { return *mode_; }
  const RuntimeStorages& storages() const { return *storages_; }
  /// Bytes of all runtime storages, all ranks.
  uint64_t storage_bytes() const;
  /// Waits for work the sync mode left running after its last commit (SyncMode::settle): a reading of the
  /// process's open files or page cache taken afterwards sees no update still in progress. Never throws.
  void settle() { mode_->settle(); }
  /// Tests only: `hook` runs inside every later commit's pause, before the storages are written (to provoke races
  /// exactly). Set before serving.
  void debug_set_inside_pause(std::function<void()> hook) { debug_inside_pause_ = std::move(hook); }
  /// Tests only: `hook(target)` runs inside every later prepare the state machine admitted as a build, before the
  /// mode builds (to hold a prepare pending while another thread calls prepare or commit). Set while no prepare
  /// runs.
  void debug_set_inside_prepare(std::function<void(uint32_t)> hook) { debug_inside_prepare_ = std::move(hook); }
  /// Tests only: requests accepted and not yet answered (queued or decoding). Read inside a commit's pause it is
  /// exactly the number of requests that will be answered at the committed version.
  size_t debug_requests_held() const;
  /// Corrupts one byte of a storage (tests of the checks only).
  void debug_flip_storage_byte(int rank, size_t storage, uint64_t offset);
  /// Corrupts byte `offset` of the staged device-delta pack (tests of the checks only; Error(State) when none).
  void debug_corrupt_staged_delta(uint64_t offset);

 private:
  struct Active;
  void scheduler_loop();
  void run_step(Active& active);
  void fail_all(const std::string& reason);
  /// Closes the gate for `mode` (waits for the running step; drain first waits for every request in flight).
  /// Returns the time the gate closed. Caller holds `lock` on mu_.
  double close_gate(std::unique_lock<std::mutex>& lock, PauseMode mode);
  /// Ends every request in flight or queued with finish_reason "abort". Caller holds mu_.
  void abort_all_locked();
  /// What a commit applied at `target` means for the requests kept in flight. Caller holds mu_.
  void after_weights_changed_locked(uint32_t target, PauseMode mode);
  /// The gate handling shared by every commit: closes (or finds closed) the gate, runs `write` inside it, moves
  /// the version on success (stops the engine on failure), reopens the gate unless pause() holds it.
  CommitReport gated_commit(uint32_t target, PauseMode mode, const std::function<void(PhaseLog&)>& write,
                            const std::function<void(bool)>& finish);

  EngineOptions options_;
  std::vector<RankLayout> layouts_;
  std::unique_ptr<RuntimeStorages> storages_;
  HostStorages* host_storages_ = nullptr;  ///< the cpu backend's storages_ (direct access), else null
  /// cuda backend with NVFP4 scales: the commit target that swizzles them on the device (else null).
  std::unique_ptr<DeviceTransformTarget> device_transforms_;
  const HostPinner* pinner_ = nullptr;     ///< the cuda backend's host pinner, else null
  std::unique_ptr<ForwardModel> forward_;
  std::unique_ptr<SyncMode> mode_;
  std::unique_ptr<SyncStateMachine> state_;
  std::atomic<uint32_t> weight_version_{0};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> loaded_{false};

  mutable std::mutex control_mu_;  // serializes load/commit/checksums against each other
  std::function<void(uint32_t)> debug_inside_prepare_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Active>> queue_;
  std::vector<std::unique_ptr<Active>> active_;  ///< requests being decoded (touched by commit only while gated)
  size_t decoding_ = 0;  ///< requests the scheduler took from queue_ and has not answered yet
  bool pause_requested_ = false;
  bool draining_ = false;                 ///< no request leaves queue_ (a drain waits for active_ to empty)
  std::optional<PauseMode> held_pause_;   ///< set by pause(), cleared by resume()
  double held_since_ = 0;
  bool step_running_ = false;
  bool stop_ = false;
  std::string fatal_reason_;
  std::function<void()> debug_inside_pause_;
  std::thread scheduler_;
};

}  // namespace wsb
