#pragma once
// Command-line values that are names of an enum (core/sync_options.hpp's tables): CLI11 parses the name straight
// into the typed field, refusing any other value with the list of names.
#include <map>
#include <string>
#include <vector>

namespace wsb {

/// name -> value for the enum whose values are the positions of `names` (the name tables' convention), limited to
/// `allowed` when that is non-empty.
template <typename Enum>
std::map<std::string, Enum> enum_names(const std::vector<std::string>& names, const std::vector<std::string>& allowed = {}) {
  std::map<std::string, Enum> out;
  for (size_t i = 0; i < names.size(); ++i) {
    bool ok = allowed.empty();
    for (const auto& a : allowed) ok = ok || a == names[i];
    if (ok) out.emplace(names[i], static_cast<Enum>(i));
  }
  return out;
}

}  // namespace wsb
