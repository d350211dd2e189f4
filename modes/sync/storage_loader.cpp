#include "modes/sync/storage_loader.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "models/layout/fragment_runs.hpp"
#include "modes/sync/work_pool.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

StorageLoader::StorageLoader(int threads, uint64_t piece_bytes, uint64_t mapped_chunk)
    : threads_(std::max(threads, 1)),
      piece_bytes_(piece_bytes),
      mapped_chunk_(std::max<uint64_t>(mapped_chunk, 1)),
      scratch_(static_cast<size_t>(threads_)) {}

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

void StorageLoader::load_mapped(const RuntimeStorageSpec& spec, const CanonicalLookup& mapped,
                                std::span<uint8_t> out) {
  const std::vector<FragmentRun> runs = fragment_runs(spec);  // empty: not a plain gather
  uint64_t total = 0;
  bool contiguous = !runs.empty() && out.size() == spec.bytes();
  std::vector<std::span<const uint8_t>> sources;
  for (const FragmentRun& run : runs) {
    if (!contiguous) break;
    sources.push_back(mapped(run.canonical));
    contiguous = run.outer == 1 && sources.back().size() == run.canonical_bytes;
    total += run.block;
  }
  if (!contiguous || total < mapped_chunk_) {
    load(spec, mapped, out);
    return;
  }
  struct Part {
    size_t run;
    uint64_t at, bytes;
  };
  std::vector<Part> parts;
  for (size_t i = 0; i < runs.size(); ++i) {
    const uint64_t step = piece_bytes(runs[i].block, threads_, mapped_chunk_);
    for (uint64_t at = 0; at < runs[i].block; at += step) parts.push_back({i, at, std::min(step, runs[i].block - at)});
  }
  run_largest_first(
      parts.size(), threads_, [&](size_t i) { return parts[i].bytes; },
      [&](size_t i) {
        const Part& p = parts[i];
        const FragmentRun& run = runs[p.run];
        copy_from_mapping(sources[p.run].subspan(run.src_first + p.at, p.bytes),
                          out.subspan(run.dst_offset + p.at, p.bytes), mapped_chunk_);
      });
}

}  // namespace wsb
