#pragma once
// Folding an update plan into many canonical tensors at once (the cpu mode's canonical image, the refit trainer's
// weights): every (tensor, segment) is one work item, so a tensor split into frames folds on several threads.
// Under "xxh3-128-ranges" each segment verifies its own checksum ranges as it folds; under "xxh3-128" the tensor's
// one digest (a serial hash) follows the folded bytes in order, taken in turn by whichever worker just extended
// the tensor's folded prefix. The checksum and the code check of a tensor come once all its segments are
// folded; any error restores every folded byte of every tensor before it propagates.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor_spec.hpp"
#include "modes/sync/tensor_fold.hpp"
#include "publication/publication.hpp"

namespace wsb {

/// Memory a fold keeps between prepares: per-worker scratch and the overwrite bodies of every (tensor, step)
/// (their capacity reused, so a steady-state prepare faults no fresh page in for them).
class FoldWorkspace {
 public:
  /// Scratch of `worker` (grown on demand).
  FoldScratch& scratch(size_t worker);
  /// Overwrite bodies of tensor `index` (one per step once opened).
  std::vector<OverwriteBody>& bodies(size_t index);
  /// Bytes of overwrite-body scratch held (capacity).
  uint64_t held_bytes() const;

 private:
  std::vector<std::unique_ptr<FoldScratch>> scratch_;
  std::vector<std::vector<OverwriteBody>> bodies_;
};

/// One tensor to fold: its spec and its bytes (at plan.from).
struct FoldTarget {
  const TensorSpec* spec = nullptr;
  std::span<uint8_t> bytes;
};

/// Called with each folded chunk of tensor `index` (see FoldChunkSink: concurrently for disjoint chunks, before
/// the checksum is verified).
using FoldListener = std::function<void(size_t index, const FoldChunk& chunk)>;

/// Folds `plan` into every target on `threads` threads and verifies each target checksum (of the final bytes, in
/// the last step's checksum_format) and its codes (check_codes), as fold_tensor does for one. On any error every byte of every target is
/// restored to plan.from before the error of the lowest failing target index propagates (Error(Format) of a
/// payload, Error(Checksum) as throw_checksum_mismatch words it, Error(Format) of an
/// invalid code, or what `listener` throws). Opening every payload (headers, frame extents, overwrite bodies)
/// comes first: such errors leave every byte untouched. Throws Error(State) when the targets are undefined (restoring
/// them ran out of memory, or a target ended unverified): the caller must not use them.
void fold_in_parallel(const UpdatePlan& plan, std::span<const FoldTarget> targets, int threads,
                      FoldWorkspace& workspace, const FoldListener& listener, const FoldOptions& options = {});

}  // namespace wsb
