#include "models/layout/layout_builder.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

CanonIndex::CanonIndex(const ModelProfile& p) : prefix_(p.tensor_prefix), profile_id_(p.id) {
  for (TensorSpec& t : p.canonical_tensors()) by_name_.emplace(t.name, std::move(t));
}

const TensorSpec& CanonIndex::at(const std::string& name) const {
  auto it = by_name_.find(prefix_ + name);
  if (it == by_name_.end())
    throw Error(ErrorKind::Missing,
                fmt::format("profile '{}': canonical tensor '{}' not found", profile_id_, prefix_ + name));
  return it->second;
}

Fragment CanonIndex::slice(const std::string& name, int dim, int64_t start, int64_t length) const {
  const TensorSpec& t = at(name);
  return Fragment{t.name, t.shape, dim, start, length};
}

Fragment CanonIndex::whole(const std::string& name) const {
  const TensorSpec& t = at(name);
  return Fragment{t.name, t.shape, 0, 0, t.shape.empty() ? 1 : t.shape[0]};
}

RuntimeStorageSpec make_spec(std::string name, DType dtype, std::vector<Fragment> fragments, Shape gathered,
                             std::string_view transform, Shape runtime) {
  RuntimeStorageSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.fragments = std::move(fragments);
  s.transform = std::string(transform);
  s.shape = transform == "none" ? gathered : std::move(runtime);
  s.gathered_shape = std::move(gathered);
  return s;
}

RuntimeStorageSpec rows_spec(std::string name, DType dtype, std::vector<Fragment> fragments) {
  Shape shape = fragments.front().shape();
  for (size_t i = 1; i < fragments.size(); ++i) shape[0] += fragments[i].shape()[0];
  return make_spec(std::move(name), dtype, std::move(fragments), std::move(shape));
}

void require_divides(const ModelProfile& p, int tp, std::string_view what, int64_t value) {
  if (value % tp != 0)
    throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': tp={} does not divide {} ({})", p.id, tp, what, value));
}

void require_tp(const ModelProfile& p, int tp) {
  if (tp < 1) throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': tp must be >= 1, got {}", p.id, tp));
}

void require_gqa_tp(const ModelProfile& p, int tp) {
  const ModelDims& d = p.dims;
  require_divides(p, tp, "heads", d.heads);
  if (tp <= d.kv_heads) {
    require_divides(p, tp, "kv_heads", d.kv_heads);
  } else if (tp % d.kv_heads != 0) {
    throw Error(
        ErrorKind::Mismatch,
        fmt::format("profile '{}': kv_heads ({}) does not divide tp={}, so kv heads cannot be replicated evenly", p.id,
                    d.kv_heads, tp));
  }
}

}  // namespace wsb
