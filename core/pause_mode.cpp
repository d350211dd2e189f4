#include "core/pause_mode.hpp"

#include <array>
#include <utility>

namespace wsb {
namespace {
constexpr std::array<std::pair<PauseMode, std::string_view>, 4> kNames{{{PauseMode::Drain, "drain"},
                                                                        {PauseMode::Retract, "retract"},
                                                                        {PauseMode::InPlace, "in_place"},
                                                                        {PauseMode::Abort, "abort"}}};
}  // namespace

std::string_view name_of(PauseMode mode) {
  for (const auto& [m, n] : kNames) {
    if (m == mode) return n;
  }
  return "?";
}

std::optional<PauseMode> parse_pause_mode(std::string_view name) {
  for (const auto& [m, n] : kNames) {
    if (n == name) return m;
  }
  return std::nullopt;
}

const std::vector<PauseMode>& all_pause_modes() {
  static const std::vector<PauseMode> modes{PauseMode::Drain, PauseMode::Retract, PauseMode::InPlace,
                                            PauseMode::Abort};
  return modes;
}

}  // namespace wsb
