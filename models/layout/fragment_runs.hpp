#pragma once
// Where the bytes of each canonical tensor land in an untransformed runtime storage, so a producer of canonical
// bytes (prepare's delta fold) can place each chunk into the rank images while the chunk is still in cache,
// instead of a second pass over the whole canonical image.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/layout/tp_layout.hpp"

namespace wsb {

/// One fragment of a plain-gather storage (transform "none", or one that is the identity for its shapes), as byte
/// runs: for o in [0, outer), canonical bytes
/// [src_first + o * stride, + block) go to storage bytes [dst_offset + o * block, + block) (the row-major slice
/// rule of Fragment). All offsets and lengths in bytes.
struct FragmentRun {
  std::string canonical;         ///< canonical tensor name
  uint64_t canonical_bytes = 0;  ///< bytes of the whole canonical tensor its shape implies
  uint64_t src_first = 0;
  uint64_t block = 0;
  uint64_t stride = 0;
  uint64_t outer = 0;
  uint64_t dst_offset = 0;
};

/// The run of one fragment of `spec` (dst_offset 0): the slice rule of Fragment in bytes. Throws Error(Mismatch)
/// naming the storage and the canonical tensor when `f` does not fit its tensor's shape (dim outside it, slice
/// beyond its extent). load_storage's gather and fragment_runs share it.
FragmentRun fragment_run(const RuntimeStorageSpec& spec, const Fragment& f);

/// The runs of every fragment of `spec` in gather order, or an empty vector when the storage is not a plain gather
/// (a transform that is not the identity for its shapes, transform_is_identity in models/transform/transform.hpp,
/// or a fragment that load_storage would refuse): such storages go through load_storage, which reports the error. The runs of a returned storage cover
/// each of its spec.bytes() bytes exactly once.
std::vector<FragmentRun> fragment_runs(const RuntimeStorageSpec& spec);

/// Calls piece(canonical_offset, storage_offset, bytes) for each contiguous piece of canonical bytes [from, to) of
/// run.canonical that `run` places, in increasing order; the pieces are exactly what place_run_range copies, so a
/// caller that writes them some other way (comparing each word with the one it replaces) places the same bytes.
template <class Piece>
void for_each_run_piece(const FragmentRun& run, uint64_t from, uint64_t to, Piece&& piece) {
  if (run.block == 0 || run.outer == 0 || to <= from) return;
  // The blocks are at src_first + o * stride; only those that end after `from` and start before `to` overlap.
  uint64_t o = from <= run.src_first ? 0 : (from - run.src_first) / run.stride;
  for (; o < run.outer; ++o) {
    const uint64_t begin = run.src_first + o * run.stride;
    if (begin >= to) break;
    const uint64_t lo = begin > from ? begin : from;
    const uint64_t hi = begin + run.block < to ? begin + run.block : to;
    if (lo >= hi) continue;
    piece(lo, run.dst_offset + o * run.block + (lo - begin), hi - lo);
  }
}

/// Copies the part of canonical bytes [from, to) of run.canonical that `run` places into `storage` (the whole
/// runtime storage). `canonical` is the whole canonical tensor; only its bytes [from, to) are read. Calling it for
/// consecutive ranges that cover the tensor writes exactly what load_storage writes for this run. `streamed`: the
/// bytes are next read by a device copy or another pass, not by this core soon, so pieces of at least
/// kPlaceStreamingMinBytes go out with streamed stores (no read of each destination line first); false keeps them
/// in this core's cache (a scratch gather the transform reads at once).
void place_run_range(const FragmentRun& run, std::span<const uint8_t> canonical, uint64_t from, uint64_t to,
                     std::span<uint8_t> storage, bool streamed = true);

}  // namespace wsb
