#pragma once
// cpu mode (docs/design.md): one canonical image per host and one rank image per TP rank; prepare stages the
// compressed deltas once, folds them in canonical space, verifies every checksum, then runs every tensor through
// the ordinary loader into the rank images; commit only copies rank images into the live storages. A canonical
// tensor that a storage holds whole and unchanged lives in that storage (canonical_homes.hpp): its fold writes the
// runtime bytes in place. With the commit strategy "device-delta" (device_delta_commit.hpp) every write into the
// rank images is recorded against the live bytes it replaces (the in-place folds too, from the fold's mask), and
// the pause applies the staged changes where the storages live.
#include <memory>
#include <optional>

#include "models/layout/fragment_runs.hpp"
#include "models/layout/storage_pieces.hpp"
#include "modes/cpu/canonical_homes.hpp"
#include "modes/cpu/device_delta_commit.hpp"
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
  /// loader into the rank images; when `recorder` is not null, each piece is built in scratch and written through
  /// it (DeltaRecorder::copy compares it with the live bytes it replaces).
  void build_rank_images(PhaseLog& log, const std::vector<bool>& placed, DeltaRecorder* recorder);
  /// Plain-gather storages of the rank images, by canonical tensor: where the fold places each final chunk. Sets
  /// `placed` for the storages it covers.
  struct Placement {
    std::span<uint8_t> storage;
    size_t flat = 0;  ///< flat storage index over ranks (the recorder's)
    FragmentRun run;
    bool home = false;  ///< the storage is the tensor's home: the fold already wrote these bytes
  };
  std::vector<std::vector<Placement>> plan_placements(std::vector<bool>& placed);

  SyncContext context_;
  std::vector<RankImage> images_;  ///< one per TP rank
  CanonicalHomes homes_;           ///< the canonical tensors kept in images_ (canonical_homes.hpp)
  CanonicalImage canonical_;
  /// Per flat storage: a home the current native load staged (it holds the checkpoint's bytes).
  std::vector<bool> staged_homes_;
  size_t native_staged_ = 0;       ///< storages the native load staged in the images (all: they hold the live bytes)
  std::optional<uint32_t> images_version_;
  /// device-delta only (its preflight may drop a staged pack that fails its digest).
  std::unique_ptr<DeviceDeltaCommit> delta_;
  /// Per prepare worker, kept between prepares: the gathered copy a transform reads, and the row pointers of an
  /// FP8 weight band (no fresh allocation, so no page faults, per storage).
  std::vector<PieceScratch> piece_scratch_;
  /// device-delta: per worker, the bytes of the piece being built, before the recorder writes them into the image.
  std::vector<ScratchBytes> build_scratch_;
};

}  // namespace wsb
