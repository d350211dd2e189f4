#pragma once
// Apply side of the refit mode, one per engine TP rank: turns the weights of that rank's aligned batches (its
// shards of canonical tensors, rank_shards.hpp) into its rank image through the ordinary loader. A weight that
// feeds a plain-gather storage is placed straight from the receive buffer (the fragment runs of the shard-rebased
// storage); a weight that feeds a storage with a post-load transform is copied aside into the rank's stash, and that
// storage is loaded (load_storage on the shard-rebased spec: gather + quantization transform) once its last weight
// has arrived. Nothing keeps a reference into a receive buffer past apply().
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/layout/fragment_runs.hpp"
#include "modes/refit/rank_shards.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

/// One weight of an aligned batch as a rank received it: its index (canonical order) and this rank's bytes of it.
struct ArrivedWeight {
  size_t index = 0;
  std::span<const uint8_t> bytes;
};

class RankApplier {
 public:
  /// `layout` is rank `rank`'s, `shards` that rank's shards (canonical order), `canonical_index` maps a canonical
  /// tensor name to its index. Allocates the stash (the bytes of every shard a transform storage needs). All three
  /// must outlive the applier. Throws what plan_rank_shards / fragment_run throw for a malformed layout.
  RankApplier(int rank, const RankLayout& layout, const std::vector<ShardSlice>& shards,
              const std::function<size_t(const std::string&)>& canonical_index);

  /// Starts one refit into `image` (rank `rank`'s layout): every storage of it will be rewritten.
  void begin(RankImage& image);
  /// Weight `index` (canonical order) arrived with `bytes`, this rank's shard of it. Throws Error(Mismatch) when
  /// the byte count differs from the shard's, Error(State) for a weight delivered twice in one refit or outside
  /// begin()/finish(), plus load_storage's errors for a completed transform storage (all "refit: rank R: ...").
  void apply(size_t index, std::span<const uint8_t> bytes);
  /// apply() for every weight of one batch, the byte copies (placements and stash copies) split into pieces of at
  /// least `min_piece` bytes (piece_bytes) across `pool` (may be null) and the transform storages the batch
  /// completes loaded in parallel. Same checks and errors as apply(), every weight checked before any byte is copied.
  void apply_batch(std::span<const ArrivedWeight> weights, WorkPool* pool, uint64_t min_piece = uint64_t{1} << 20);
  /// Ends the refit. Throws Error(Missing, "refit: rank R: storage 'S' did not receive weight 'W'") when a storage
  /// still lacks a weight.
  void finish();

  /// Bytes of the stash (host memory held between refits).
  uint64_t stash_bytes() const { return stash_.size(); }

 private:
  struct Storage {
    RuntimeStorageSpec local;            ///< fragments rebased on this rank's shards
    bool plain = false;                  ///< placed run by run; else loaded from the stash once complete
    std::vector<size_t> weights;         ///< distinct weight indices it needs
    size_t pending = 0;                  ///< weights of `weights` not yet arrived in this refit
  };
  struct Target {
    size_t storage;
    FragmentRun run;  ///< dst_offset inside the storage
  };
  struct Weight {
    std::vector<Target> placements;          ///< plain storages' runs from this weight
    std::optional<uint64_t> stash_offset;    ///< where it is kept for transform storages
    std::vector<size_t> dependents;          ///< transform storages that need it
    std::vector<size_t> plain_storages;      ///< plain storages it feeds, each once
    bool arrived = false;
  };
  void load_from_stash(size_t storage);
  /// Weight bytes [from, to) of `t`'s run into the image: place_run_range, or one streaming copy when the run is
  /// contiguous.
  void place_piece(const Target& t, std::span<const uint8_t> bytes, uint64_t from, uint64_t to);

  int rank_;
  const std::vector<ShardSlice>& shards_;
  std::vector<Storage> storages_;
  std::vector<Weight> weights_;
  HostBuffer stash_;
  RankImage* image_ = nullptr;
};

}  // namespace wsb::refit
