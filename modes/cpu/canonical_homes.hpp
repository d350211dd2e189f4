#pragma once
// Which canonical tensors the cpu mode keeps inside its rank images. A runtime storage whose fragment runs are all
// whole canonical tensors, each copied in order (at TP 1: an embedding, a norm, a bf16 projection, a fused qkv or
// gate_up made of whole tensors), holds exactly those tensors' bytes one after another. The canonical image can
// then keep each such tensor in its place in the storage: the fold writes the runtime bytes themselves, so those
// storages need no placement copy, and the host holds their bytes once instead of twice.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "modes/sync/rank_image.hpp"

namespace wsb {

struct CanonicalHomes {
  /// Per canonical tensor (profile order): the bytes of the rank-image storage it lives in; empty: not homed.
  std::vector<std::span<uint8_t>> tensor;
  /// Per runtime storage (flat index over ranks, rank by rank): every byte of it is a homed tensor.
  std::vector<bool> storage;
  /// Per canonical tensor: the flat index of the storage it lives in; kNoHome when not homed.
  std::vector<size_t> storage_of;
  /// Sum of the homed tensors' bytes.
  uint64_t bytes = 0;
  static constexpr size_t kNoHome = SIZE_MAX;
};

/// The homes of `tensors` in `images` (one per rank of `layouts`, laid out by them). A storage is a home when it
/// is a plain gather (fragment_runs) whose every run copies its whole tensor in order (from canonical byte 0, one
/// block, or blocks as long as their stride, adding up to the tensor's bytes per `tensors`), starts 64 B aligned in
/// the storage, and names a tensor no earlier storage (lower rank, then lower index) or earlier run homes; then
/// each of its runs homes its tensor.
/// A tensor placed in several storages (replicated across ranks, or tied) is homed in the first of them and copied
/// into the others. Throws Error(Mismatch) when `images` and `layouts` differ in length.
CanonicalHomes canonical_homes(const std::vector<TensorSpec>& tensors, const std::vector<RankLayout>& layouts,
                               std::vector<RankImage>& images);

}  // namespace wsb
