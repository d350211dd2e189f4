#pragma once
// refit mode (docs/design.md "refit"): non-colocated streamed refit. Prepare advances the trainer simulator to the
// target version, then S = TP sender ranks stream their shards in transport buckets of one agreed size to one
// receiver per engine TP rank; the receivers align their rank-local streams by weight name (StreamAligner,
// RankReceiverGroup) and apply every aligned batch through the ordinary loader and quantization transform into
// that rank's rank image (RankApplier: payload index i to rank i). The refit stages into rank images because the
// target is complete only once every stream ended: an error anywhere leaves the live storages untouched. Commit
// copies the rank images into the live storages (the pause), once per refit, so weight_version advances once.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "modes/refit/buffer_pool.hpp"
#include "modes/refit/rank_applier.hpp"
#include "modes/refit/rank_shards.hpp"
#include "modes/refit/refit_layout.hpp"
#include "modes/refit/refit_link.hpp"
#include "modes/refit/trainer_sim.hpp"
#include "modes/refit/transport.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/sync_mode.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

// Transports (refit_link.hpp, core/sync_options.hpp RefitTransport): "inproc" (sender threads in the engine's process,
// InProcTransport), "shm" (the senders on threads of a child process forked for each refit, buckets through a
// shared-memory ring per rank, ShmTransport; a sender process that dies fails the refit on every rank, never hangs
// it) and "cuda-ipc" (the senders in an exec'd `wsbench refit-sender` process, buckets through device rings it
// exports and the engine imports, CudaIpcTransport; cuda backend only).

class RefitMode final : public SyncMode {
 public:
  /// Throws Error(Mismatch) for cuda-ipc without the cuda
  /// backend's device IPC, Error(Mismatch) naming the weight and rank when a
  /// shard is larger than the bucket (senders never split a weight), and what plan_rank_shards throws.
  explicit RefitMode(SyncContext context);
  ~RefitMode() override;
  std::string_view name() const override { return "refit"; }
  void on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) override;
  /// Phases: prepare.trainer.{plan,stage,apply_verify,shard} (the trainer's side), prepare.stream (senders, aligner
  /// and apply into the rank images; bytes = every rank's shard bytes) and, within it, prepare.stream_start (from
  /// its start until every rank's first bucket arrived: sender setup left after the trainer phases, plus the first
  /// bucket; 0 bytes; recorded for a refit that succeeded). A cuda-ipc sender process is started before the
  /// trainer phases, so its setup overlaps them. Errors: the trainer's (Missing target,
  /// Lineage, Checksum ...), then any stream error, raised with the text of the rank that detected it
  /// ("refit: rank R: ... weight 'W'").
  void prepare(uint32_t served, uint32_t target, PhaseLog& log) override;
  std::optional<uint32_t> prepared_version() const override { return images_version_; }
  void preflight(uint32_t target) const override;
  void commit(StorageTarget& storages, PhaseLog& log) override;
  ModeMemory memory() const override;
  std::span<uint8_t> native_load_staging(int rank, size_t index, uint64_t bytes) override;

  /// Bucket size in bytes both sides use.
  uint64_t bucket_bytes() const { return bucket_bytes_; }
  /// Refits streamed to completion since construction (each one is one weight-version step).
  uint64_t refits() const { return refits_; }
  /// Aligned batches of the last refit.
  uint64_t last_batches() const { return last_batches_; }

 private:
  /// Receives one refit over `link` (opened here when null) into the rank images.
  void stream(PhaseLog& log, std::unique_ptr<RefitLink> link);
  LinkSetup link_setup();

  SyncContext context_;
  /// The prepare's worker threads: receive copies, placements, and the in-process senders' packing.
  std::unique_ptr<WorkPool> work_;
  RankShards shards_;
  RefitLayout layout_;
  TrainerSim trainer_;
  uint64_t bucket_bytes_ = 0;
  BufferPool pool_;  ///< two receive buffers per rank: one received into while the other is applied
  /// inproc: each sender rank's bucket buffers, allocated and faulted in once (a trainer's send buffers), so a
  /// refit's stream allocates none.
  std::vector<std::vector<std::vector<uint8_t>>> send_buffers_;
  std::vector<RankImage> images_;
  std::vector<std::unique_ptr<RankApplier>> appliers_;
  std::optional<uint32_t> images_version_;
  uint64_t refits_ = 0;
  uint64_t last_batches_ = 0;
};

}  // namespace wsb::refit
