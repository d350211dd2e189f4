#include "models/layout/fragment_runs.hpp"

#include <algorithm>
#include <cstring>

#include "models/transform/transform.hpp"

namespace wsb {

std::vector<FragmentRun> fragment_runs(const RuntimeStorageSpec& spec) {
  if (spec.transform != kTransformNone || spec.gathered_shape != spec.shape) return {};
  const uint64_t esize = dtype_size(spec.dtype);
  std::vector<FragmentRun> runs;
  uint64_t dst = 0;
  for (const Fragment& f : spec.fragments) {
    const Shape& shape = f.canonical_shape;
    const size_t dim = static_cast<size_t>(f.dim);
    // Exactly the fragments copy_fragment (load_storage.cpp) accepts; anything else is left to load_storage.
    if (f.dim < 0 || (!shape.empty() && dim >= shape.size()) || (shape.empty() && f.dim != 0)) return {};
    const int64_t extent = shape.empty() ? 1 : shape[dim];
    if (f.start < 0 || f.length < 0 || f.start + f.length > extent) return {};
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
    run.dst_offset = dst;
    dst += run.block * run.outer;
    runs.push_back(std::move(run));
  }
  if (dst != spec.bytes()) return {};
  return runs;
}

void place_run_range(const FragmentRun& run, std::span<const uint8_t> canonical, uint64_t from, uint64_t to,
                     std::span<uint8_t> storage) {
  if (run.block == 0 || run.outer == 0 || to <= from) return;
  // The blocks are at src_first + o * stride; only those that end after `from` and start before `to` overlap.
  uint64_t o = from <= run.src_first ? 0 : (from - run.src_first) / run.stride;
  for (; o < run.outer; ++o) {
    const uint64_t begin = run.src_first + o * run.stride;
    if (begin >= to) break;
    const uint64_t lo = std::max(begin, from), hi = std::min(begin + run.block, to);
    if (lo >= hi) continue;
    std::memcpy(storage.data() + run.dst_offset + o * run.block + (lo - begin), canonical.data() + lo, hi - lo);
  }
}

}  // namespace wsb
