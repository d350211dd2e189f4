#include "modes/sync/storage_loader.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

StorageLoader::StorageLoader(int threads, uint64_t piece_bytes)
    : threads_(std::max(threads, 1)), piece_bytes_(piece_bytes), scratch_(static_cast<size_t>(threads_)) {}

void StorageLoader::load(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out) {
  if (out.size() != spec.bytes())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': output buffer has {} bytes, the storage needs {}",
                                                 spec.name, out.size(), spec.bytes()));
  const std::vector<StoragePiece> pieces = storage_pieces(spec, piece_bytes_);
  if (pieces.size() <= 1 || threads_ == 1) {
    for (const StoragePiece& piece : pieces) load_storage_piece(spec, canonical, piece, out, scratch_[0]);
    return;
  }
  run_largest_first(
      pieces.size(), threads_, [&](size_t i) { return pieces[i].bytes; },
      [&](size_t i, size_t worker) { load_storage_piece(spec, canonical, pieces[i], out, scratch_[worker]); });
}

}  // namespace wsb
