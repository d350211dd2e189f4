#pragma once
// The disk mode's prepare pass: the target checkpoint built in one streaming pass over the base. Each canonical
// tensor is read from the base checkpoint in chunks, every delta of the lineage is applied to the chunk, the chunk
// is hashed, code-scanned and written into a fresh directory, and its writeback starts at once; tensors run in
// parallel, largest first. The target checksum of each tensor is the only check (a wrong base byte, a wrong
// delta, both show there). Nothing of the base is modified: a failure leaves the base and the previous checkpoint
// as they were, and only the new directory, which nothing trusts until it is renamed into place, to remove.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/tensor_spec.hpp"
#include "modes/sync/fault_point.hpp"
#include "publication/publication.hpp"

namespace wsb {

/// What to materialize.
struct MaterializeJob {
  std::filesystem::path base;    ///< checkpoint directory at plan.from (index + shards, or one model.safetensors)
  std::string base_origin;       ///< names the base in errors ("publication 000000", a directory)
  const UpdatePlan* plan = nullptr;  ///< steps applied to every tensor (none: the base is only verified)
  /// Carries the target's expected checksum of every tensor: the plan's last step, or the FULL publication the base
  /// is when the plan has no step.
  const Publication* target = nullptr;
  uint32_t version = 0;          ///< the target version (error texts)
  std::filesystem::path out;     ///< the directory to create (must not exist)
  int threads = 1;
  /// Drops the base's pages from the page cache once read: for a base that is about to be replaced (the previous
  /// mutable checkpoint), never for a shared one (a store's FULL publication).
  bool drop_base_cache = false;
  FaultHook fault_hook{};
};

struct MaterializeResult {
  uint64_t tensor_bytes = 0;  ///< canonical bytes read from the base and written (headers aside)
  uint64_t file_bytes = 0;    ///< bytes of the files written, headers and index included
};

/// Writes `job.out`: one shard per base shard holding its canonical tensors in the base's data order (the same
/// relative names; a tensor of the base that is not canonical is left out), each shard's `__metadata__` mapping its
/// tensors to their target checksums, and model.safetensors.index.json. Every file and directory is fsynced and
/// dropped from the page cache before it returns. Throws, before anything is written: Error(Missing/Mismatch)
/// naming `base_origin` and the tensor (expect_tensor), CheckpointReader's errors for the base; then
/// Error(Resource) "reserve <file>: No space left on device for N bytes", TensorChunkFold's errors (Format,
/// Checksum naming the tensor), Error(Truncated/Io) naming a file. A fault hook (FaultPoint::DiskCheckpointWrite)
/// runs after each tensor is written, from the worker thread that wrote it.
MaterializeResult materialize_checkpoint(const MaterializeJob& job, const std::vector<TensorSpec>& canonical);

}  // namespace wsb
