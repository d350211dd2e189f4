#pragma once
// disk mode (docs/design.md): prepare materializes a complete, verified, mutable checkpoint on local disk (seeded from
// the newest FULL publication or the previously applied version, deltas folded tensor by tensor, each target
// checksum verified, written, fsynced; lineage state cleared before mutation and written after). Commit is a
// complete native reload from that directory into the same storages, with one storage of staging memory.
#include <optional>

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

/// xxh3-128 hex over the publication's sorted "tensor\tchecksum\n" lines: identifies its target bytes.
std::string publication_digest(const Publication& publication);

class DiskMode final : public SyncMode {
 public:
  explicit DiskMode(SyncContext context);
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

 private:
  void clear_state() const;
  void write_state(const DiskLineageState& state) const;
  void reseed(const Store& store, uint32_t full_version, PhaseLog& log);
  void apply_plan(const UpdatePlan& plan, uint32_t seeded_from, const Store& store, PhaseLog& log);
  /// True when `state` was written from `store`'s current publication of state.version.
  bool state_matches(const DiskLineageState& state, const Store& store) const;

  SyncContext context_;
  std::vector<TensorSpec> canonical_;
  std::optional<uint32_t> prepared_;
  uint64_t staging_bytes_ = 0;
  HostBuffer staging_[2];  ///< commit's double-buffered staging (pinned on CUDA)
};

}  // namespace wsb
