#pragma once
// One runtime storage split into pieces that build independently: each writes its own bytes of the storage and
// only reads canonical tensors, so a large storage (an embedding, a stack of experts, an FP8 weight) loads on
// several threads instead of one.
#include <cstdint>
#include <span>
#include <vector>

#include "core/scratch_bytes.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

/// A piece of a storage's load. Slices: leading-dim slices [first, first + count) of storage_slices(spec) (a
/// storage with one slice is one piece: the whole load_storage). A kFp8ChannelWeight band (n1 > n0): gathered rows
/// [n0, n1) of expert `first` (0 for a 2-D weight), transposed straight from the canonical rows.
struct StoragePiece {
  int64_t first = 0;
  int64_t count = 1;
  int64_t n0 = 0, n1 = 0;
  uint64_t bytes = 0;  ///< bytes the piece moves (runtime bytes of its slices; a band's gathered bytes): its weight
};

/// Whether storage_pieces cuts `spec` into bands: a kFp8ChannelWeight of gathered [N, K] or [E, N, K], transposed
/// by fp8_channel_weight_band straight from the canonical rows (no gathered copy), a 2-D weight included, which
/// storage_slices leaves whole.
bool loads_by_band(const RuntimeStorageSpec& spec);

/// Splits `spec` into pieces of about `piece_bytes` (a slice or a band of 64 rows is never cut): an FP8 channel
/// weight ([N, K] or [E, N, K]) into bands of rows per expert, a storage of several storage_slices into runs of
/// slices, anything else into one piece. Together the pieces write every byte of the storage, each byte once.
/// Shape errors are left to load_storage_piece, which reports them as load_storage does.
std::vector<StoragePiece> storage_pieces(const RuntimeStorageSpec& spec, uint64_t piece_bytes);

/// What one thread keeps from piece to piece: the gathered copy a slice's transform reads, a band's row pointers.
struct PieceScratch {
  ScratchBytes gathered;
  std::vector<const uint8_t*> rows;
};

/// Writes the bytes of `piece` (from storage_pieces(spec, ...)) into `out`, the whole storage (out.size() ==
/// spec.bytes()); the rest of `out` is untouched. The pieces of one storage_pieces call together write exactly
/// load_storage's output. Throws load_storage's errors (Error(Mismatch) naming the storage or canonical tensor,
/// Error(Format) for an unknown transform).
void load_storage_piece(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, const StoragePiece& piece,
                        std::span<uint8_t> out, PieceScratch& scratch);

}  // namespace wsb
