#include "modes/refit/refit_layout.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

RefitLayout::RefitLayout(std::vector<std::vector<TensorSpec>> rank_specs) : rank_specs_(std::move(rank_specs)) {
  if (rank_specs_.empty()) throw Error(ErrorKind::Mismatch, "refit: layout has no ranks");
  for (const auto& s : rank_specs_[0]) {
    if (!index_.emplace(s.name, names_.size()).second) {
      fail_rank(ErrorKind::Mismatch, 0, fmt::format("layout lists weight '{}' twice", s.name));
    }
    names_.push_back(s.name);
  }
  for (size_t r = 1; r < rank_specs_.size(); ++r) {
    const auto& specs = rank_specs_[r];
    if (specs.size() != names_.size()) {
      fail_rank(ErrorKind::Mismatch, static_cast<int>(r),
                fmt::format("layout has {} weights, rank 0 has {}", specs.size(), names_.size()));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name != names_[i]) {
        fail_rank(ErrorKind::Mismatch, static_cast<int>(r),
                  fmt::format("layout weight #{} is '{}', rank 0 has '{}'", i, specs[i].name, names_[i]));
      }
    }
  }
}

std::optional<size_t> RefitLayout::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

}  // namespace wsb::refit
