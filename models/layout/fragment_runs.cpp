#include "models/layout/fragment_runs.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/copy_streaming.hpp"
#include "core/errors.hpp"
#include "models/transform/transform.hpp"

namespace wsb {

namespace {

/// Pieces from one page up are placed with streamed stores.
constexpr size_t kPlaceStreamingMinBytes = 4096;

}  // namespace

FragmentRun fragment_run(const RuntimeStorageSpec& spec, const Fragment& f) {
  const Shape& shape = f.canonical_shape;
  const uint64_t esize = dtype_size(spec.dtype);
  const size_t dim = static_cast<size_t>(f.dim);
  if (f.dim < 0 || (!shape.empty() && dim >= shape.size()) || (shape.empty() && f.dim != 0))
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': fragment dim {} does not exist in canonical tensor "
                                                 "'{}' {}",
                                                 spec.name, f.dim, f.canonical, shape_string(shape)));
  const int64_t extent = shape.empty() ? 1 : shape[dim];
  if (f.start < 0 || f.length < 0 || f.start + f.length > extent)
    throw Error(ErrorKind::Mismatch,
                fmt::format("storage '{}': fragment [{}, {}) of dim {} exceeds canonical tensor '{}' {}", spec.name,
                            f.start, f.start + f.length, f.dim, f.canonical, shape_string(shape)));
  uint64_t outer = 1, inner = esize;
  for (size_t i = 0; i < dim && i < shape.size(); ++i) outer *= static_cast<uint64_t>(shape[i]);
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= static_cast<uint64_t>(shape[i]);
  FragmentRun run;
  run.canonical = f.canonical;
  run.canonical_bytes = shape_numel(shape) * esize;
  run.block = static_cast<uint64_t>(f.length) * inner;
  run.stride = static_cast<uint64_t>(extent) * inner;
  run.outer = outer;
  run.src_first = static_cast<uint64_t>(f.start) * inner;
  return run;
}

std::vector<FragmentRun> fragment_runs(const RuntimeStorageSpec& spec) {
  if (!transform_is_identity(spec.transform, spec.dtype, spec.gathered_shape, spec.shape)) return {};
  std::vector<FragmentRun> runs;
  uint64_t dst = 0;
  for (const Fragment& f : spec.fragments) {
    FragmentRun run;
    try {
      run = fragment_run(spec, f);
    } catch (const Error&) {
      return {};  // load_storage reports it when the storage is loaded
    }
    run.dst_offset = dst;
    dst += run.block * run.outer;
    runs.push_back(std::move(run));
  }
  if (dst != spec.bytes()) return {};
  return runs;
}

void place_run_range(const FragmentRun& run, std::span<const uint8_t> canonical, uint64_t from, uint64_t to,
                     std::span<uint8_t> storage, bool streamed) {
  // Streamed stores skip reading every destination line first (a third of a fold's memory traffic) when the
  // placed bytes are next read by the commit's DMA. Pieces of a few lines go through memcpy.
  for_each_run_piece(run, from, to, [&](uint64_t src, uint64_t dst, uint64_t bytes) {
    if (streamed) {
      copy_streaming(storage.data() + dst, canonical.data() + src, bytes, kPlaceStreamingMinBytes);
    } else {
      std::memcpy(storage.data() + dst, canonical.data() + src, bytes);
    }
  });
}

}  // namespace wsb
