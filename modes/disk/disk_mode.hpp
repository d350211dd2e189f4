#pragma once
// disk mode (docs/design.md): prepare materializes a complete, verified, mutable checkpoint on local disk in one
// streaming pass (disk_materialize.hpp) over a base: the previously materialized version, the checkpoint the engine
// was natively loaded from, or the newest FULL publication, whichever is newest. The target is written into a new
// directory beside the verified one and renamed into place once complete and fsynced; the lineage state is cleared
// before that swap and written after it. Commit is a complete native reload from that directory into the same
// storages, with one storage of staging memory.
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "publication/publication.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/sync_mode.hpp"

namespace wsb {

/// Contents of <checkpoint>/.weight_sync/state.json: the verified version, and what binds it to its source (the
/// store's path and a digest of the publication's checksum map), so a checkpoint left by another store or by a
/// re-published version is never taken for verified.
struct DiskLineageState {
  uint32_t version = 0;
  uint32_t seeded_from = 0;
  std::string store;   ///< absolute store root
  std::string digest;  ///< publication_digest of `version`'s publication
};

/// Where a prepare read the base version from.
struct DiskBase {
  enum class Kind {
    Local,   ///< the mode's own verified checkpoint (its state file vouches for it)
    Native,  ///< the checkpoint the engine was natively loaded from (outside the store)
    Full,    ///< a FULL publication of the store
  };
  Kind kind = Kind::Full;
  std::filesystem::path dir;
  uint32_t version = 0;
  uint32_t seeded_from = 0;  ///< recorded in the state the prepare writes
};

/// xxh3-128 hex over the publication's sorted "tensor\tchecksum\n" lines: identifies its target bytes.
std::string publication_digest(const Publication& publication);

class DiskMode final : public SyncMode {
 public:
  explicit DiskMode(SyncContext context);
  /// Waits for the replaced checkpoint's removal (finish_retiring).
  ~DiskMode() override;
  DiskMode(const DiskMode&) = delete;
  DiskMode& operator=(const DiskMode&) = delete;
  std::string_view name() const override { return "disk"; }
  void on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) override;
  void prepare(uint32_t served, uint32_t target, PhaseLog& log) override;
  std::optional<uint32_t> prepared_version() const override { return prepared_; }
  void preflight(uint32_t target) const override;
  void commit(StorageTarget& storages, PhaseLog& log) override;
  ModeMemory memory() const override;
  /// One of the commit staging buffers (pinned on CUDA; a commit refills it).
  std::span<uint8_t> native_load_staging(int rank, size_t index, uint64_t bytes) override;

  /// The mutable checkpoint directory (workdir/checkpoint).
  std::filesystem::path checkpoint_dir() const;
  /// nullopt when the state file is absent (unverified checkpoint).
  std::optional<DiskLineageState> read_state() const;
  /// The base the last successful materialization read (nullopt before one, and after an idempotent prepare).
  const std::optional<DiskBase>& last_base() const { return last_base_; }
  /// Blocks until the checkpoint that the last swap replaced (workdir/checkpoint.old) is removed. A commit starts
  /// that removal in the background once the reload is done, so that neither the pause nor the prepare pays for
  /// unlinking a whole checkpoint (seconds for 16 GB on a filesystem mounted with discard); the next prepare waits
  /// for it in phase prepare.retire_wait. Returns at once when no removal runs.
  void finish_retiring();
  /// finish_retiring().
  void settle() override { finish_retiring(); }

 private:
  void clear_state() const;
  void write_state(const DiskLineageState& state) const;
  /// True when `state` was written from `store`'s current publication of state.version.
  bool state_matches(const DiskLineageState& state, const Store& store) const;
  /// The newest FULL publication at or before `target`, as a base; nullopt when there is none.
  std::optional<DiskBase> newest_full(const Store& store, uint32_t target) const;
  /// Plans base -> target (an empty plan when they are equal) and checks it covers the model.
  UpdatePlan plan_from(const Store& store, const DiskBase& base, uint32_t target) const;
  /// One pass from `base` into workdir/checkpoint.next (phase prepare.materialize). Removes that directory when it
  /// throws.
  void materialize(const Store& store, const DiskBase& base, const UpdatePlan& plan, uint32_t target, PhaseLog& log);
  /// Moves checkpoint.next into place (state cleared before, written after: phase prepare.swap). The checkpoint it
  /// replaces stays as checkpoint.old, unverified, until the commit removes it.
  void swap_in(const Store& store, const DiskBase& base, const UpdatePlan& plan, uint32_t target, PhaseLog& log);
  /// Starts removing the retired checkpoint on a thread of its own (on this one if no thread can be started).
  void retire_in_background();

  SyncContext context_;
  std::vector<TensorSpec> canonical_;
  std::optional<uint32_t> prepared_;
  /// The engine's native load: the checkpoint it serves from until the first commit, a base for the first prepare.
  std::optional<std::pair<std::filesystem::path, uint32_t>> native_;
  std::optional<DiskBase> last_base_;
  uint64_t staging_bytes_ = 0;
  HostBuffer staging_[2];  ///< commit's double-buffered staging (pinned on CUDA)
  /// The checkpoint the last swap moved aside, left for the commit to remove (empty: none).
  std::filesystem::path retired_;
  std::mutex retire_mu_;  ///< guards retiring_: settle() may join it from another thread than the prepare's
  std::thread retiring_;  ///< removes a retired checkpoint after a commit
  std::atomic<bool> retire_done_{true};  ///< set by retiring_ when its removal is over
};

}  // namespace wsb
