#include <fmt/format.h>

#include <iostream>

#include "cli/commands.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb {
namespace fs = std::filesystem;

int cmd_models(const fs::path& profiles_dir, int tp) {
  const auto profiles = list_profiles(profiles_dir);  // errors before any output
  std::cout << fmt::format("# {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}  {}\n", "profile", "family", "quant", "tensors",
                           "canonical", fmt::format("per-rank tp{}", tp), "notes");
  std::cout << fmt::format("# {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}\n", "", "", "", "(count)", "(bytes)", "(bytes)");
  for (const auto& profile : profiles) {
    std::string per_rank;
    std::string notes = profile.tiny ? "CI preset" : "";
    try {
      const auto layouts = build_rank_layouts(profile, tp);
      uint64_t lo = layouts[0].bytes(), hi = lo;
      for (const auto& l : layouts) {
        lo = std::min(lo, l.bytes());
        hi = std::max(hi, l.bytes());
      }
      per_rank = lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi);
    } catch (const std::exception& e) {
      per_rank = "n/a";
      notes = e.what();  // e.g. the dimension tp does not divide
    }
    std::cout << fmt::format("  {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}  {}\n", profile.id, profile.family,
                             profile.quantization, profile.canonical_tensors().size(), profile.canonical_bytes(),
                             per_rank, notes);
  }
  return 0;
}

}  // namespace wsb
