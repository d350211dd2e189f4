#pragma once
// The trainer side of a refit, simulated in the engine's host: the trainer's copy of the weights (a canonical image
// that the store's deltas advance to the next weight version, as training would) and, per sender rank, the shard
// it streams. A shard that is one contiguous run of its tensor is streamed from the canonical image in place;
// the others (column slices) are copied into the rank's shard buffer once per version.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "core/phase_log.hpp"
#include "modes/refit/rank_shards.hpp"
#include "modes/refit/sender.hpp"
#include "modes/sync/canonical_image.hpp"

namespace wsb::refit {

class TrainerSim {
 public:
  /// `shards` (plan_rank_shards over the profile's tensors) must outlive the simulator. `memory` Shared puts the
  /// weights and the cut shards in memfd mappings another process can map (the cuda-ipc sender process).
  TrainerSim(const ModelProfile& profile, const RankShards& shards, HostMemory memory = HostMemory::Private);

  /// The trainer starts from the engine's boot weights (`checkpoint` at `version`).
  void load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log);
  /// Advances the weights to `target` from `store` (CanonicalImage::advance, phases "prepare.trainer.*") unless
  /// they already are there, then cuts the non-contiguous shards (phase "prepare.trainer.shard"). Throws what
  /// advance throws; the weights stay at their version on error. `before_mutation` as in advance.
  void advance(const std::filesystem::path& store, uint32_t target, int threads, PhaseLog& log,
               const std::function<void()>& before_mutation);
  uint32_t version() const { return image_.version(); }
  bool loaded() const { return image_.loaded(); }
  const CanonicalImage& image() const { return image_; }

  /// Sender rank `rank`'s shard: one entry per canonical tensor, in canonical order, bytes borrowed from the
  /// simulator. Their places never change (every buffer is allocated once, in the constructor), so a sender may
  /// map them before an advance; their content is the current version's until the next advance.
  std::vector<ShardWeight> rank_weights(int rank) const;
  /// Every buffer rank_weights() lends bytes from: the weights' image, then each rank's cut buffer that is not empty.
  std::vector<const HostBuffer*> buffers() const;
  /// Host bytes of the weights and of the cut shards.
  uint64_t image_bytes() const { return image_.bytes(); }
  uint64_t shard_bytes() const;

 private:
  void cut_shards(PhaseLog& log);

  const RankShards& shards_;
  CanonicalImage image_;
  std::vector<HostBuffer> cut_;                       ///< per rank: its non-contiguous shards back to back
  std::vector<std::vector<uint64_t>> cut_offsets_;    ///< [rank][tensor] offset in cut_[rank] (non-contiguous ones)
  bool cut_valid_ = false;
};

}  // namespace wsb::refit
