#include "modes/sync/delta_fold.hpp"

#include <fmt/format.h>

#include <set>

#include "core/checksum.hpp"
#include "core/errors.hpp"
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

/// The calling thread's fold scratch: kept for the thread's life, so folding tensor after tensor allocates no
/// decoder or chunk buffer.
FoldScratch& thread_scratch() {
  thread_local FoldScratch scratch;
  return scratch;
}

void unfold_all(TensorFold& fold) {
  for (size_t s = 0; s < fold.segment_count(); ++s) fold.unfold_segment(s, thread_scratch());
}

}  // namespace

void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo_out) {
  fold_tensor(plan, spec, bytes, undo_out, FoldChunkSink{});
}

void fold_tensor(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes, FoldUndo* undo_out,
                 const FoldChunkSink& sink) {
  FoldUndo undo;
  undo.fold = std::make_unique<TensorFold>(plan, spec, bytes, undo.bodies);  // nothing changed if this throws
  TensorFold& fold = *undo.fold;
  FoldScratch& scratch = thread_scratch();
  Xxh3Hasher hasher;
  bool suspect = false;
  try {
    // Segments in order: one verifier follows the whole tensor, range by range.
    RangeVerifier verifier(fold.expected_checksum(), hasher);
    const FoldChunkSink hash_then_sink = [&](const FoldChunk& c) {
      verifier.update(c.tensor.subspan(c.from, c.to - c.from));
      if (sink) sink(c);
    };
    for (size_t s = 0; s < fold.segment_count(); ++s) {
      fold.fold_segment(s, scratch, hash_then_sink, nullptr);
      suspect = suspect || fold.suspect_codes(s);
    }
    verifier.require_verified_to(bytes.size(), spec.name, version_string(plan.to));
    // A matching checksum only proves the bytes are the publisher's: a NaN/Inf code or an E8M0 0xFF scale would
    // still reach the engine, so the target codes are validated before anything live can see them.
    if (suspect) check_codes(spec, bytes, fmt::format("publication {}", version_string(plan.to)));
  } catch (...) {
    unfold_all(fold);
    throw;
  }
  if (undo_out != nullptr) *undo_out = std::move(undo);
}

void unfold_tensor(const UpdatePlan&, FoldUndo& undo, std::span<uint8_t>) {
  if (undo.fold) unfold_all(*undo.fold);
}

}  // namespace wsb
