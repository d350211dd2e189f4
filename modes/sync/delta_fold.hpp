#pragma once
// Applying an update plan to canonical tensors: fold every step's delta per tensor, verify only the final
// checksum (catch-up 1->3), and undo exactly when a later tensor fails.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_spec.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"

namespace wsb {

/// Checks that every step of `plan` carries exactly the canonical tensors. Throws Error(Missing) naming a
/// tensor a step lacks, Error(Mismatch) naming a tensor the model does not have.
void check_plan_covers(const UpdatePlan& plan, const std::vector<TensorSpec>& canonical);

/// Everything needed to restore one folded tensor: the inverse of each applied step (overwrite steps keep the
/// swapped-out bytes; xor steps are re-decoded from the staged payload, which costs no memory).
struct FoldUndo {
  std::string tensor;
  std::vector<DecodedDelta> overwrite_inverse;  ///< by step index; empty entries for xor steps
  size_t applied_steps = 0;
};

/// Folds the plan's payloads for `spec` into `bytes` (currently at plan.from) and verifies the final xxh3-128
/// against the last step's checksum. On any error `bytes` is restored before Error(Format/Checksum) naming the
/// tensor propagates. When `undo` is given, it receives what unfold_tensor needs.
void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo);

/// Called with consecutive byte ranges [from, to) of the folded tensor, in increasing order and covering it, once
/// their bytes hold the target version: chunk by chunk while the last step's xor streams (the bytes are still in
/// cache), else once for the whole tensor after verification. A range may be reported before the checksum is
/// verified: nothing built from it may be used until fold_tensor returns.
using FoldedRange = std::function<void(size_t from, size_t to)>;

/// fold_tensor that reports the target bytes to `on_folded` as they become final (see FoldedRange).
void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo,
                 const FoldedRange& on_folded);

/// Restores `bytes` to plan.from after a successful fold_tensor.
void unfold_tensor(const UpdatePlan& plan, FoldUndo& undo, std::span<uint8_t> bytes);

}  // namespace wsb
