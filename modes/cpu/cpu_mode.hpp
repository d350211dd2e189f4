#pragma once
// cpu mode (docs/design.md): one canonical image per host and one rank image per TP rank; prepare stages the
// compressed deltas once, folds them in canonical space, verifies every checksum, then runs every tensor through
// the ordinary loader into the rank images; commit only copies rank images into the live storages. With the
// commit strategy "device-delta" (staged_delta.hpp) it keeps a second set of rank images, so the live one can be
// diffed against the new one, and the pause applies the staged changes where the storages live.
#include <optional>

#include "models/layout/fragment_runs.hpp"
#include "modes/sync/canonical_image.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/sync_mode.hpp"

namespace wsb {

class CpuMode final : public SyncMode {
 public:
  explicit CpuMode(SyncContext context);
  std::string_view name() const override { return "cpu"; }
  void on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) override;
  void prepare(uint32_t served, uint32_t target, PhaseLog& log) override;
  std::optional<uint32_t> prepared_version() const override { return images_version_; }
  bool device_delta() const { return context_.sync.cpu.commit_strategy == CommitStrategy::DeviceDelta; }
  void preflight(uint32_t target) const override;
  void commit(StorageTarget& storages, PhaseLog& log) override;
  ModeMemory memory() const override;
  /// The rank image of (rank, index): pinned on CUDA, and rebuilt by every prepare.
  std::span<uint8_t> native_load_staging(int rank, size_t index, uint64_t bytes) override;

  /// Version the canonical image holds (tests).
  uint32_t canonical_version() const { return canonical_.version(); }
  std::span<const uint8_t> canonical_tensor(const std::string& name) const { return canonical_.tensor(name); }

 private:
  /// Runs every storage of `placed` (flat index over ranks) not already written by the fold through the ordinary
  /// loader into the prepared image set.
  void build_rank_images(PhaseLog& log, const std::vector<bool>& placed);
  /// Plain-gather storages of the image set about to be prepared, by canonical tensor: where the fold places
  /// each final chunk. Sets `placed` for the storages it covers.
  struct Placement {
    std::span<uint8_t> storage;
    FragmentRun run;
  };
  std::vector<std::vector<Placement>> plan_placements(std::vector<bool>& placed);
  /// device-delta: diffs the live image set against the new one, checks the live storages' digests and stages
  /// the sparse storages' changes (cpu_delta_commit.cpp). Leaves staged_ empty (full copy) when it cannot.
  void stage_device_delta(uint32_t target, PhaseLog& log);
  /// device-delta commit: staged changes applied in place, every other storage copied in full.
  void commit_device_delta(StorageTarget& storages, PhaseLog& log);
  std::vector<RankImage>& next_images() { return sets_[device_delta() && live_known_ ? 1 - live_set_ : live_set_]; }

  SyncContext context_;
  CanonicalImage canonical_;
  std::vector<RankImage> sets_[2];  ///< rank images; set 1 only with device-delta
  int live_set_ = 0;                ///< device-delta: the set whose bytes the live storages hold, if live_known_
  bool live_known_ = false;
  int prepared_set_ = 0;            ///< the set prepare built
  size_t native_staged_ = 0;        ///< storages the native load staged in set 0 (all: set 0 holds the live bytes)
  std::optional<uint32_t> images_version_;
  /// device-delta: which (rank, storage) are staged for images_version_ (flat index over ranks), empty when the
  /// next commit copies everything; mutable so preflight can drop a staged delta that fails its digest.
  mutable std::vector<bool> staged_;
  mutable bool delta_rejected_ = false;
  /// Per prepare worker, kept between prepares: the gathered copy a transform reads, and the row pointers of an
  /// FP8 weight band (no fresh allocation, so no page faults, per storage).
  std::vector<ScratchBytes> transform_scratch_;
  std::vector<std::vector<const uint8_t*>> row_scratch_;
};

}  // namespace wsb
