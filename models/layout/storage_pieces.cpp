#include "models/layout/storage_pieces.hpp"

#include <algorithm>

#include "models/transform/fp8_channel.hpp"

namespace wsb {

bool loads_by_band(const RuntimeStorageSpec& spec) {
  const size_t rank = spec.gathered_shape.size();
  return spec.transform == kFp8ChannelWeight && (rank == 2 || rank == 3) && spec.shape.size() == rank;
}

std::vector<StoragePiece> storage_pieces(const RuntimeStorageSpec& spec, uint64_t piece_bytes) {
  std::vector<StoragePiece> pieces;
  piece_bytes = std::max<uint64_t>(piece_bytes, 1);
  if (loads_by_band(spec)) {
    const size_t rank = spec.gathered_shape.size();
    const int64_t experts = rank == 3 ? spec.gathered_shape[0] : 1;
    const int64_t n = spec.gathered_shape[rank - 2], k = std::max<int64_t>(1, spec.gathered_shape[rank - 1]);
    // Bands of whole 64-row groups: the band writes 64-byte runs of every runtime row, whole cache lines.
    const int64_t band = std::max<int64_t>(64, static_cast<int64_t>(piece_bytes) / k / 64 * 64);
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t n0 = 0; n0 < n; n0 += band) {
        const int64_t n1 = std::min(n, n0 + band);
        pieces.push_back(StoragePiece{e, 1, n0, n1, static_cast<uint64_t>((n1 - n0) * k)});
      }
    }
    if (!pieces.empty()) return pieces;
  }
  const int64_t slices = storage_slices(spec);
  const uint64_t slice_bytes = spec.bytes() / static_cast<uint64_t>(slices);
  const int64_t per =
      slices == 1 ? 1 : std::max<int64_t>(1, static_cast<int64_t>(piece_bytes / std::max<uint64_t>(slice_bytes, 1)));
  for (int64_t first = 0; first < slices; first += per) {
    const int64_t count = std::min(per, slices - first);
    pieces.push_back(StoragePiece{first, count, 0, 0, slice_bytes * static_cast<uint64_t>(count)});
  }
  return pieces;
}

void load_storage_piece(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, const StoragePiece& piece,
                        std::span<uint8_t> out, PieceScratch& scratch) {
  if (piece.n1 > piece.n0) {
    scratch.rows.resize(static_cast<size_t>(piece.n1 - piece.n0));
    const int64_t n = spec.gathered_shape[spec.gathered_shape.size() - 2];
    storage_rows(spec, canonical, piece.first * n + piece.n0, scratch.rows);
    fp8_channel_weight_band(spec.name, spec.gathered_shape, spec.shape, piece.first, piece.n0, piece.n1, scratch.rows,
                            out);
    return;
  }
  load_storage_slices(spec, canonical, out, piece.first, piece.count, &scratch.gathered);
}

}  // namespace wsb
