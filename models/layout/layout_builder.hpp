#pragma once
// Building blocks of the MoE families' layout builders (internal to models/layout): canonical lookups that carry
// the profile's tensor prefix, storage constructors and the TP divisibility checks.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/layout/tp_layout.hpp"

namespace wsb {

/// Canonical tensors of a profile by name. Names passed in are the un-prefixed HF names ("model.layers.0...");
/// fragments record the prefixed canonical name (profile.tensor_prefix + name).
class CanonIndex {
 public:
  explicit CanonIndex(const ModelProfile& profile);
  /// Throws Error(Missing) naming the tensor and the profile.
  const TensorSpec& at(const std::string& name) const;
  /// Slice [start, start + length) of dim `dim`.
  Fragment slice(const std::string& name, int dim, int64_t start, int64_t length) const;
  /// The whole tensor (a scalar is taken as dim 0, start 0, length 1).
  Fragment whole(const std::string& name) const;
  /// The canonical (prefixed) spelling of `name`.
  std::string canonical_name(const std::string& name) const { return prefix_ + name; }

 private:
  std::string prefix_;
  std::string profile_id_;
  std::unordered_map<std::string, TensorSpec> by_name_;
};

/// Storage with explicit shapes; `runtime` defaults to `gathered` (transform "none").
RuntimeStorageSpec make_spec(std::string name, DType dtype, std::vector<Fragment> fragments, Shape gathered,
                             std::string_view transform = "none", Shape runtime = {});
/// Fragments concatenated along dim 0 (they share trailing dims), transform "none": gathered = runtime shape.
RuntimeStorageSpec rows_spec(std::string name, DType dtype, std::vector<Fragment> fragments);

/// Throws Error(Mismatch) "profile '<id>': tp=<tp> does not divide <what> (<value>)" unless value % tp == 0.
void require_divides(const ModelProfile& profile, int tp, std::string_view what, int64_t value);
/// tp >= 1, else Error(Mismatch).
void require_tp(const ModelProfile& profile, int tp);
/// GQA head checks shared with llama: tp divides heads; tp <= kv_heads divides kv_heads, or tp > kv_heads is a
/// multiple of kv_heads (kv heads replicated). Error(Mismatch) naming the dimension.
void require_gqa_tp(const ModelProfile& profile, int tp);

}  // namespace wsb
