#include "modes/sync/delta_fold.hpp"

#include <fmt/format.h>

#include <set>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/xor_stream.hpp"
#include "models/quant/code_check.hpp"

namespace wsb {

void check_plan_covers(const UpdatePlan& plan, const std::vector<TensorSpec>& canonical) {
  std::set<std::string, std::less<>> names;
  for (const auto& spec : canonical) names.insert(spec.name);
  for (const auto& step : plan.steps) {
    for (const auto& spec : canonical) {
      if (!step->contains(spec.name)) {
        throw Error(ErrorKind::Missing, fmt::format("publication {}: tensor '{}' missing from the delta",
                                                    version_string(step->version()), spec.name));
      }
    }
    for (const auto& name : step->tensor_names()) {
      if (!names.contains(name)) {
        throw Error(ErrorKind::Mismatch, fmt::format("publication {}: tensor '{}' is not a tensor of the model",
                                                     version_string(step->version()), name));
      }
    }
  }
}

namespace {

void revert_steps(const UpdatePlan& plan, FoldUndo& undo, std::span<uint8_t> bytes) {
  for (size_t i = undo.applied_steps; i-- > 0;) {
    const auto& step = *plan.steps[i];
    if (step.manifest().encoding == DeltaEncoding::Overwrite) {
      apply_delta_swap(undo.overwrite_inverse[i], bytes);
    } else {
      apply_xor_payload(step.payload(undo.tensor), bytes, undo.tensor);
    }
  }
  undo.applied_steps = 0;
}

}  // namespace

void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo_out) {
  fold_tensor(plan, spec, bytes, undo_out, FoldedRange{});
}

void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo_out,
                 const FoldedRange& on_folded) {
  FoldUndo undo;
  undo.tensor = spec.name;
  undo.overwrite_inverse.resize(plan.steps.size());
  try {
    // When the last step is an xor, each chunk it produces is final: hash it and scan its codes right away, while
    // it is in cache, instead of two more passes over the tensor in memory (prepare is memory-bound).
    const bool fused = plan.steps.back()->manifest().encoding == DeltaEncoding::Xor;
    Xxh3Hasher hasher;
    CodeScanner scanner(spec);
    size_t hashed = 0;
    const XorProgress on_final_chunk = [&](size_t upto) {
      hasher.update(bytes.subspan(hashed, upto - hashed));
      scanner.advance(bytes, upto);
      if (on_folded) on_folded(hashed, upto);
      hashed = upto;
    };
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const auto& step = *plan.steps[i];
      if (step.manifest().encoding == DeltaEncoding::Xor) {
        const bool last = i + 1 == plan.steps.size();
        // streamed: no tensor-sized mask
        apply_xor_payload(step.payload(spec.name), bytes, spec.name, last ? on_final_chunk : XorProgress{});
      } else {
        DecodedDelta delta = decode_delta(DeltaEncoding::Overwrite, step.payload(spec.name), bytes.size(), spec.name);
        apply_delta_swap(delta, bytes);
        undo.overwrite_inverse[i] = std::move(delta);
      }
      undo.applied_steps = i + 1;
    }
    const std::string& expected = plan.steps.back()->expected_checksum(spec.name);
    const std::string actual = fused ? hasher.hex() : xxh3_128_hex(bytes);
    if (actual != expected) {
      throw Error(ErrorKind::Checksum,
                  fmt::format("tensor '{}': xxh3-128 of version {} is {}, publication says {}", spec.name,
                              version_string(plan.to), actual, expected));
    }
    // A matching checksum only proves the bytes are the publisher's: a NaN/Inf code or an E8M0 0xFF scale would
    // still reach the engine, so the target codes are validated before anything live can see them.
    if (!fused || scanner.found()) check_codes(spec, bytes, fmt::format("publication {}", version_string(plan.to)));
    if (!fused && on_folded && !bytes.empty()) on_folded(0, bytes.size());
  } catch (...) {
    revert_steps(plan, undo, bytes);
    throw;
  }
  if (undo_out != nullptr) *undo_out = std::move(undo);
}

void unfold_tensor(const UpdatePlan& plan, FoldUndo& undo, std::span<uint8_t> bytes) { revert_steps(plan, undo, bytes); }

}  // namespace wsb
