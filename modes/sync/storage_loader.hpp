#pragma once
// Loading whole runtime storages with each storage's pieces spread over several threads: what a reload from a
// checkpoint (disk mode's commit, the engine's native load) does storage by storage. One thread gathering and
// transforming a storage runs at 3-4 GB/s for FP8 and MXFP4 storages, below the disk's read rate and far below
// memory's; several threads also keep several page-cache misses of the mapped checkpoint in flight.
#include <cstdint>
#include <span>
#include <vector>

#include "models/layout/storage_pieces.hpp"

namespace wsb {

class StorageLoader {
 public:
  /// Pieces of `piece_bytes` (default 4 MiB: dozens per large storage, each within a core's L2 with its source)
  /// on up to `threads` threads (< 1 counts as 1; the calling thread is one of them).
  explicit StorageLoader(int threads, uint64_t piece_bytes = uint64_t{4} << 20);

  /// load_storage(spec, canonical, out), byte for byte, split into storage_pieces across the threads; a storage of
  /// one piece loads on the calling thread. `canonical` is called from several threads at once (it must only
  /// read). Throws load_storage's errors (that of the first failing piece, by piece order); after an error `out`
  /// may be partly written, as after load_storage's.
  void load(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out);

  int threads() const { return threads_; }

 private:
  int threads_;
  uint64_t piece_bytes_;
  std::vector<PieceScratch> scratch_;  ///< one per thread, kept from storage to storage
};

}  // namespace wsb
