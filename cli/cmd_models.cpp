#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb {
namespace fs = std::filesystem;

int cmd_models(const fs::path& profiles_dir, int tp, std::ostream& out, std::ostream& err) {
  if (!fs::is_directory(profiles_dir)) {
    throw Error(ErrorKind::Missing, fmt::format("{}: profiles directory not found", profiles_dir.string()));
  }
  // Each file on its own (find_profile, as a matrix names it): one broken custom profile must not hide the others.
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(profiles_dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<ModelProfile> profiles;
  std::vector<std::string> unreadable;
  for (const fs::path& f : files) {
    try {
      profiles.push_back(find_profile(f.stem().string(), profiles_dir));
    } catch (const std::exception& e) {
      const std::string what = e.what();
      // load_profile's messages start with the path already.
      unreadable.push_back(what.rfind(f.string(), 0) == 0 ? what : f.string() + ": " + what);
    }
  }
  out << fmt::format("# {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}  {}\n", "profile", "family", "quant", "tensors",
                     "canonical", fmt::format("per-rank tp{}", tp), "notes");
  out << fmt::format("# {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}\n", "", "", "", "(count)", "(bytes)", "(bytes)");
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
    out << fmt::format("  {:<24} {:<12} {:<12} {:>9} {:>16} {:>16}  {}\n", profile.id, profile.family,
                       profile.quantization, profile.canonical_tensors().size(), profile.canonical_bytes(), per_rank,
                       notes);
  }
  for (const std::string& u : unreadable) err << "wsbench models: " << u << "\n";
  if (unreadable.empty()) return 0;
  err << fmt::format("wsbench models: {} of {} profiles could not be read\n", unreadable.size(), files.size());
  return 2;
}

}  // namespace wsb
