#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/errors.hpp"
#include "models/layout/fragment_runs.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform.hpp"

namespace wsb {

namespace {

/// Copies the slice [start, start+length) along `dim` of a row-major tensor: for every index of the dims before
/// `dim` one contiguous block of length * (product of the dims after `dim`) elements.
void copy_fragment(const RuntimeStorageSpec& spec, const Fragment& f, std::span<const uint8_t> src, uint8_t* dst,
                   bool streamed) {
  const uint64_t esize = dtype_size(spec.dtype);
  if (src.size() != shape_numel(f.canonical_shape) * esize)
    throw Error(ErrorKind::Mismatch,
                fmt::format("canonical tensor '{}' has {} bytes, but {} {} needs {} (storage '{}')", f.canonical,
                            src.size(), dtype_name(spec.dtype), shape_string(f.canonical_shape),
                            shape_numel(f.canonical_shape) * esize, spec.name));
  const FragmentRun run = fragment_run(spec, f);
  place_run_range(run, src, 0, src.size(), std::span<uint8_t>(dst, run.block * run.outer), streamed);
}

}  // namespace

namespace {

/// Checks shared by load_storage and gather_storage; returns the gathered bytes.
uint64_t check_fragments(const RuntimeStorageSpec& spec) {
  if (!is_known_transform(spec.transform))
    throw Error(ErrorKind::Format, fmt::format("storage '{}': unknown post-load transform '{}' (supported: {})",
                                               spec.name, spec.transform, fmt::join(transform_names(), ", ")));
  uint64_t fragment_bytes = 0;
  for (const Fragment& f : spec.fragments) fragment_bytes += shape_numel(f.shape()) * dtype_size(spec.dtype);
  if (fragment_bytes != spec.gathered_bytes())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': fragments hold {} bytes, the gathered {} {} needs {}",
                                                 spec.name, fragment_bytes, dtype_name(spec.dtype),
                                                 shape_string(spec.gathered_shape), spec.gathered_bytes()));
  return fragment_bytes;
}

/// `streamed`: see place_run_range (false for a scratch gather the transform reads next).
void gather_into(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, uint8_t* dst, bool streamed) {
  for (const Fragment& f : spec.fragments) {
    copy_fragment(spec, f, canonical(f.canonical), dst, streamed);
    dst += shape_numel(f.shape()) * dtype_size(spec.dtype);
  }
}

}  // namespace

void gather_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out) {
  const uint64_t fragment_bytes = check_fragments(spec);
  if (out.size() != fragment_bytes)
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': gather buffer has {} bytes, the fragments need {}",
                                                 spec.name, out.size(), fragment_bytes));
  gather_into(spec, canonical, out.data(), /*streamed=*/true);  // read next by the device transform's copy
}

void load_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out,
                  ScratchBytes* scratch) {
  const uint64_t fragment_bytes = check_fragments(spec);
  if (out.size() != spec.bytes())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': output buffer has {} bytes, the storage needs {}",
                                                 spec.name, out.size(), spec.bytes()));
  const bool as_is = spec.transform == kTransformNone;
  if (as_is && spec.gathered_shape != spec.shape)
    throw Error(ErrorKind::Mismatch,
                fmt::format("storage '{}': gathered shape {} differs from shape {} under "
                            "transform none",
                            spec.name, shape_string(spec.gathered_shape), shape_string(spec.shape)));
  // Transform "none" gathers straight into the storage; the others gather into a scratch buffer first (left
  // uninitialized: the gather writes every byte), because their output positions differ from the gather order.
  if (as_is) {
    gather_into(spec, canonical, out.data(), /*streamed=*/true);
    return;
  }
  ScratchBytes own;
  ScratchBytes& gathered = scratch != nullptr ? *scratch : own;
  gathered.reserve(fragment_bytes);
  gather_into(spec, canonical, gathered.data(), /*streamed=*/false);  // the transform reads it at once
  std::vector<std::string> sources;
  sources.reserve(spec.fragments.size());
  for (const Fragment& f : spec.fragments) sources.push_back(f.canonical);
  apply_transform(spec.transform,
                  TransformIo{spec.name, sources, spec.dtype, spec.gathered_shape,
                              std::span<const uint8_t>(gathered.data(), fragment_bytes), spec.shape, out});
}

namespace {

/// One fragment that is a whole canonical tensor already stacked over the experts (gpt-oss's [E, ...] expert
/// tensors), sliced, if at all, below the expert dim: expert e's gathered bytes are the e-th run of it.
bool stacked_canonical(const RuntimeStorageSpec& spec, int64_t experts) {
  if (spec.fragments.size() != 1) return false;
  const Fragment& f = spec.fragments[0];
  if (f.canonical_shape.empty() || f.canonical_shape[0] != experts) return false;
  return f.dim != 0 || (f.start == 0 && f.length == experts);
}

}  // namespace

int64_t storage_slices(const RuntimeStorageSpec& spec) {
  static const std::string_view kPerExpert[] = {kTransformNone,     kFp8ChannelWeight,  kFp8ChannelScale,
                                                kMxfp4Pad,          kMxfp4ScaleSwizzle, kNvfp4ScaleSwizzle};
  if (std::find(std::begin(kPerExpert), std::end(kPerExpert), spec.transform) == std::end(kPerExpert)) return 1;
  // "none" keeps the gathered layout, so any leading-dim split is exact; the MoE transforms only in their stacked
  // [E, ...] form (rank >= 3), where a 2-D form's first runtime dim could equal the gathered one by coincidence.
  const size_t min_rank = spec.transform == kTransformNone ? 2 : 3;
  if (spec.shape.empty() || spec.gathered_shape.size() < min_rank || spec.shape[0] != spec.gathered_shape[0]) return 1;
  const int64_t experts = spec.shape[0];
  if (experts < 2) return 1;
  if (spec.bytes() % static_cast<uint64_t>(experts) != 0 || spec.gathered_bytes() % static_cast<uint64_t>(experts) != 0)
    return 1;
  if (stacked_canonical(spec, experts)) return experts;
  if (spec.fragments.size() % static_cast<size_t>(experts) != 0) return 1;
  // Every expert's fragments must hold exactly one slice of the gathered tensor, in order.
  const size_t per = spec.fragments.size() / static_cast<size_t>(experts);
  const uint64_t slice = spec.gathered_bytes() / static_cast<uint64_t>(experts);
  for (size_t g = 0; g < spec.fragments.size(); g += per) {
    uint64_t bytes = 0;
    for (size_t i = g; i < g + per; ++i) bytes += shape_numel(spec.fragments[i].shape()) * dtype_size(spec.dtype);
    if (bytes != slice) return 1;
  }
  return experts;
}

void load_storage_slices(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out,
                         int64_t first, int64_t count, ScratchBytes* scratch) {
  if (out.size() != spec.bytes())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': output buffer has {} bytes, the storage needs {}",
                                                 spec.name, out.size(), spec.bytes()));
  const int64_t slices = storage_slices(spec);  // at least 1
  const uint64_t out_slice = spec.bytes() / static_cast<uint64_t>(slices);
  // A range outside the slices is refused by load_storage_slices_into before anything is written.
  const bool inside = first >= 0 && count >= 1 && first + count <= slices;
  load_storage_slices_into(spec, canonical,
                           inside ? out.subspan(out_slice * static_cast<uint64_t>(first),
                                                out_slice * static_cast<uint64_t>(count))
                                  : out.first(0),
                           first, count, scratch);
}

void load_storage_slices_into(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical,
                              std::span<uint8_t> slices_out, int64_t first, int64_t count, ScratchBytes* scratch) {
  const int64_t slices = storage_slices(spec);
  if (first < 0 || count < 1 || first + count > slices) {
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': slices [{}, {}) outside its {} independent slices",
                                                 spec.name, first, first + count, slices));
  }
  const uint64_t out_slice = spec.bytes() / static_cast<uint64_t>(slices);
  if (slices_out.size() != out_slice * static_cast<uint64_t>(count))
    throw Error(ErrorKind::Mismatch,
                fmt::format("storage '{}': output buffer has {} bytes, slices [{}, {}) need {}", spec.name,
                            slices_out.size(), first, first + count, out_slice * static_cast<uint64_t>(count)));
  if (count == slices) {
    load_storage(spec, canonical, slices_out, scratch);
    return;
  }
  check_fragments(spec);
  // A sub-storage of `count` experts: the same transform on the sub-shapes writes the same bytes at the same
  // per-expert offsets (storage_slices admits only transforms that work expert by expert).
  RuntimeStorageSpec sub = spec;
  sub.shape[0] = count;
  sub.gathered_shape[0] = count;
  const std::span<uint8_t> sub_out = slices_out;
  if (stacked_canonical(spec, slices)) {
    // The sub-storage reads experts [first, first + count) of the stacked tensor: a contiguous run of it.
    Fragment& f = sub.fragments[0];
    f.canonical_shape[0] = count;
    if (f.dim == 0) f.length = count;
    const CanonicalLookup experts_only = [&](const std::string& name) {
      const auto whole = canonical(name);
      const uint64_t per_expert = whole.size() / static_cast<uint64_t>(slices);
      return whole.subspan(per_expert * static_cast<uint64_t>(first), per_expert * static_cast<uint64_t>(count));
    };
    load_storage(sub, experts_only, sub_out, scratch);
    return;
  }
  const size_t per = spec.fragments.size() / static_cast<size_t>(slices);
  sub.fragments.assign(spec.fragments.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(first)),
                       spec.fragments.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(first + count)));
  load_storage(sub, canonical, sub_out, scratch);
}

void storage_rows(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, int64_t first,
                  std::span<const uint8_t*> rows) {
  check_fragments(spec);
  const uint64_t esize = dtype_size(spec.dtype);
  const uint64_t row_bytes = spec.gathered_shape.empty() ? esize : static_cast<uint64_t>(spec.gathered_shape.back()) * esize;
  const int64_t total = row_bytes == 0 ? 0 : static_cast<int64_t>(spec.gathered_bytes() / row_bytes);
  const int64_t end = first + static_cast<int64_t>(rows.size());
  if (first < 0 || end > total)
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': gathered rows [{}, {}) outside its {} rows", spec.name,
                                                 first, end, total));
  int64_t base = 0;  // gathered row where the fragment starts
  for (const Fragment& f : spec.fragments) {
    if (base >= end) break;
    const FragmentRun run = fragment_run(spec, f);
    if (run.block % row_bytes != 0)
      throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': fragment of '{}' runs of {} bytes are not whole rows "
                                                   "of {} bytes",
                                                   spec.name, f.canonical, run.block, row_bytes));
    const uint64_t per_block = run.block / row_bytes;
    const int64_t count = static_cast<int64_t>(run.outer * per_block);
    if (base + count > first) {
      const std::span<const uint8_t> src = canonical(f.canonical);
      if (src.size() != run.canonical_bytes)
        throw Error(ErrorKind::Mismatch,
                    fmt::format("canonical tensor '{}' has {} bytes, but {} {} needs {} (storage '{}')", f.canonical,
                                src.size(), dtype_name(spec.dtype), shape_string(f.canonical_shape),
                                run.canonical_bytes, spec.name));
      for (int64_t r = std::max(first, base); r < std::min(end, base + count); ++r) {
        const uint64_t local = static_cast<uint64_t>(r - base);
        rows[static_cast<size_t>(r - first)] =
            src.data() + run.src_first + local / per_block * run.stride + local % per_block * row_bytes;
      }
    }
    base += count;
  }
}

}  // namespace wsb
