#pragma once
// Loading whole runtime storages with each storage's pieces spread over several threads: what a reload from a
// checkpoint (disk mode's commit, the engine's native load) does storage by storage. One thread gathering and
// transforming a storage runs at 3-4 GB/s for FP8 and MXFP4 storages, below the disk's read rate and far below
// memory's; several threads also keep several page-cache misses of the mapped checkpoint in flight.
#include <cstdint>
#include <span>
#include <vector>

#include "models/checkpoint/mapped_copy.hpp"
#include "models/layout/storage_pieces.hpp"

namespace wsb {

class StorageLoader {
 public:
  /// Pieces of `piece_bytes` (default 4 MiB: dozens per large storage, each within a core's L2 with its source)
  /// on up to `threads` threads (< 1 counts as 1; the calling thread is one of them).
  /// `mapped_chunk`: the bytes load_mapped copies between two releases (kMappedCopyChunk; tests use less).
  explicit StorageLoader(int threads, uint64_t piece_bytes = uint64_t{4} << 20,
                         uint64_t mapped_chunk = kMappedCopyChunk);

  /// load_storage(spec, canonical, out), byte for byte, split into storage_pieces across the threads; a storage of
  /// one piece loads on the calling thread. `canonical` is called from several threads at once (it must only
  /// read). Throws load_storage's errors (that of the first failing piece, by piece order); after an error `out`
  /// may be partly written, as after load_storage's.
  void load(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out);

  /// load(), for canonical bytes that lie in a read-only file mapping (CheckpointReader::data): a storage that is
  /// a plain gather of contiguous runs (an embedding or lm_head, whole or split by rows across TP ranks) of at least
  /// `mapped_chunk` bytes is copied with copy_from_mapping, in parts across the threads, each part's pages dropped
  /// from the resident set as it is copied: otherwise the pages of the whole storage (1.2 GB for a full embedding)
  /// sit on top of everything a native load or a reload holds until the caller releases them. Other storages, and
  /// a canonical tensor of the wrong size, go to load(), which reports it. Never on heap memory (see
  /// copy_from_mapping).
  void load_mapped(const RuntimeStorageSpec& spec, const CanonicalLookup& mapped, std::span<uint8_t> out);

  int threads() const { return threads_; }

 private:
  int threads_;
  uint64_t piece_bytes_;
  uint64_t mapped_chunk_;
  std::vector<PieceScratch> scratch_;  ///< one per thread, kept from storage to storage
};

}  // namespace wsb
