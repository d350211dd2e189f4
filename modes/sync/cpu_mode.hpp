#pragma once
// cpu mode (docs/design.md): one canonical image per host and one rank image per TP rank; prepare stages the
// compressed deltas once, folds them in canonical space, verifies every checksum, then runs every tensor through
// the ordinary loader into the rank images; commit only copies rank images into the live storages.
#include <map>
#include <optional>

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
  void preflight(uint32_t target) const override;
  void commit(StorageTarget& storages, PhaseLog& log) override;
  ModeMemory memory() const override;
  /// The rank image of (rank, index): pinned on CUDA, and rebuilt by every prepare.
  std::span<uint8_t> native_load_staging(int rank, size_t index, uint64_t bytes) override;

  /// Version the canonical image holds (tests).
  uint32_t canonical_version() const { return canonical_version_; }
  std::span<const uint8_t> canonical_tensor(const std::string& name) const;

 private:
  std::span<uint8_t> tensor_span(size_t index);
  void build_rank_images(PhaseLog& log);

  SyncContext context_;
  std::vector<TensorSpec> canonical_;
  std::map<std::string, size_t, std::less<>> canonical_index_;
  std::vector<uint64_t> canonical_offsets_;
  HostBuffer canonical_image_;
  uint32_t canonical_version_ = 0;
  bool loaded_ = false;
  std::vector<RankImage> images_;
  std::optional<uint32_t> images_version_;
};

}  // namespace wsb
