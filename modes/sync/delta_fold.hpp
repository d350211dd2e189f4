#pragma once
// Applying an update plan to canonical tensors: fold every step's delta per tensor, verify only the final
// checksum (catch-up 1->3), and undo exactly when a later tensor fails. The work itself is tensor_fold.hpp's
// (chunk by chunk, every step in one memory pass); parallel_fold.hpp folds many tensors at once.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_spec.hpp"
#include "modes/sync/tensor_fold.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"

namespace wsb {

/// Checks that every step of `plan` carries exactly the canonical tensors. Throws Error(Missing) naming a
/// tensor a step lacks, Error(Mismatch) naming a tensor the model does not have.
void check_plan_covers(const UpdatePlan& plan, const std::vector<TensorSpec>& canonical);

/// Everything needed to restore one folded tensor: the opened fold (its overwrite bodies hold the bytes the
/// overwrite steps replaced; xor steps are decoded again from the staged payloads).
struct FoldUndo {
  std::vector<OverwriteBody> bodies;
  std::unique_ptr<TensorFold> fold;
};

/// Folds the plan's payloads for `spec` into `bytes` (currently at plan.from) on the calling thread and verifies
/// the final bytes against the last step's checksum (every range of "xxh3-128-ranges"), then the target codes (check_codes). On any error `bytes`
/// is restored before Error(Format/Checksum) naming the tensor propagates. When `undo` is given, it receives
/// what unfold_tensor needs.
void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo);

/// fold_tensor that reports each folded chunk to `sink` (in order; see FoldChunkSink).
void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo,
                 const FoldChunkSink& sink);

/// Restores `bytes` to plan.from after a successful fold_tensor.
void unfold_tensor(const UpdatePlan& plan, FoldUndo& undo, std::span<uint8_t> bytes);

}  // namespace wsb
