#include "reports/config_key.hpp"

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace wsb {

ConfigKey config_key(const Cell& cell) { return ConfigKey{cell.model, cell.mode_label(), cell.runtime, cell.tp}; }

std::vector<std::string> model_labels(std::span<const ConfigKey> keys) {
  std::map<std::tuple<std::string, std::string, std::string>, std::set<int64_t>> tps;
  for (const ConfigKey& k : keys) tps[{k.model, k.mode, k.runtime}].insert(k.tp);
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const ConfigKey& k : keys) {
    const bool ambiguous = tps[{k.model, k.mode, k.runtime}].size() > 1;
    out.push_back(ambiguous ? fmt::format("{} tp{}", k.model, k.tp) : k.model);
  }
  return out;
}

bool cells_need_ids(std::span<const Cell> cells) {
  std::set<std::pair<ConfigKey, std::string>> seen;
  for (const Cell& c : cells) {
    if (!seen.insert({config_key(c), c.host}).second) return true;
  }
  return false;
}

}  // namespace wsb
