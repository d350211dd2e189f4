#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

Shape Fragment::shape() const {
  Shape s = canonical_shape;
  if (!s.empty()) s[static_cast<size_t>(dim)] = length;
  return s;
}

uint64_t RuntimeStorageSpec::bytes() const { return shape_numel(shape) * dtype_size(dtype); }

uint64_t RuntimeStorageSpec::gathered_bytes() const { return shape_numel(gathered_shape) * dtype_size(dtype); }

uint64_t RankLayout::bytes() const {
  uint64_t total = 0;
  for (const RuntimeStorageSpec& s : storages) total += s.bytes();
  return total;
}

size_t RankLayout::index_of(std::string_view name) const {
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i].name == name) return i;
  throw Error(ErrorKind::Missing, fmt::format("runtime storage '{}' not found on TP rank {} of {}", name, rank, tp));
}

}  // namespace wsb
