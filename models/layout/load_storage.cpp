#include <fmt/format.h>

#include <cstring>

#include "models/core/errors.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

namespace {

/// Copies the slice [start, start+length) along `dim` of a row-major tensor: for every index of the dims before
/// `dim` one contiguous block of length * (product of the dims after `dim`) elements.
void copy_fragment(const RuntimeStorageSpec& spec, const Fragment& f, std::span<const uint8_t> src, uint8_t* dst) {
  const Shape& shape = f.canonical_shape;
  const uint64_t esize = dtype_size(spec.dtype);
  if (src.size() != shape_numel(shape) * esize)
    throw Error(
        ErrorKind::Mismatch,
        fmt::format("canonical tensor '{}' has {} bytes, but {} {} needs {} (storage '{}')", f.canonical, src.size(),
                    dtype_name(spec.dtype), shape_string(shape), shape_numel(shape) * esize, spec.name));
  const size_t dim = static_cast<size_t>(f.dim);
  const int64_t extent = shape.empty() ? 1 : shape.at(dim);
  if (f.start < 0 || f.length < 0 || f.start + f.length > extent)
    throw Error(ErrorKind::Mismatch,
                fmt::format("storage '{}': fragment [{}, {}) of dim {} exceeds canonical tensor '{}' {}", spec.name,
                            f.start, f.start + f.length, f.dim, f.canonical, shape_string(shape)));
  uint64_t outer = 1, inner = esize;
  for (size_t i = 0; i < dim && i < shape.size(); ++i) outer *= static_cast<uint64_t>(shape[i]);
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= static_cast<uint64_t>(shape[i]);
  const uint64_t block = static_cast<uint64_t>(f.length) * inner;
  const uint64_t stride = static_cast<uint64_t>(extent) * inner;
  const uint8_t* from = src.data() + static_cast<uint64_t>(f.start) * inner;
  for (uint64_t o = 0; o < outer; ++o, from += stride, dst += block) std::memcpy(dst, from, block);
}

}  // namespace

void load_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out) {
  if (spec.transform != "none")
    throw Error(ErrorKind::Format, fmt::format("storage '{}': unknown post-load transform '{}' (supported: none)",
                                               spec.name, spec.transform));
  if (out.size() != spec.bytes())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': output buffer has {} bytes, the storage needs {}",
                                                 spec.name, out.size(), spec.bytes()));
  uint64_t fragment_bytes = 0;
  for (const Fragment& f : spec.fragments) fragment_bytes += shape_numel(f.shape()) * dtype_size(spec.dtype);
  if (fragment_bytes != out.size())
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': fragments hold {} bytes, the storage {}", spec.name,
                                                 fragment_bytes, out.size()));
  uint8_t* dst = out.data();
  for (const Fragment& f : spec.fragments) {
    copy_fragment(spec, f, canonical(f.canonical), dst);
    dst += shape_numel(f.shape()) * dtype_size(spec.dtype);
  }
  // Transform "none": BF16/F16/F32 weights are used as stored.
}

}  // namespace wsb
