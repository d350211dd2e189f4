#pragma once
// The engine-side expectation of one refit: the global weight order and, per TP rank, the spec (dtype, shape) that
// rank's stream must carry for each weight. Shapes may differ between ranks (uneven shards); names and order may not.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor_spec.hpp"

namespace wsb::refit {

class RefitLayout {
 public:
  /// rank_specs[r] = rank r's weights in global order. Throws Error(Mismatch) when there are no ranks, ranks list
  /// different names or orders ("refit: rank R: layout weight #i is 'X', rank 0 has 'Y'"), or a name repeats.
  explicit RefitLayout(std::vector<std::vector<TensorSpec>> rank_specs);

  int ranks() const { return static_cast<int>(rank_specs_.size()); }
  size_t weights() const { return names_.size(); }
  const std::string& name(size_t index) const { return names_[index]; }
  /// Expected spec of weight `index` on rank `rank`.
  const TensorSpec& spec(int rank, size_t index) const { return rank_specs_[static_cast<size_t>(rank)][index]; }
  /// Global index of a weight name; nullopt when the layout has no such weight.
  std::optional<size_t> find(std::string_view name) const;

 private:
  std::vector<std::vector<TensorSpec>> rank_specs_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace wsb::refit
