#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "core/errors.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

/// Profile ids present in `dir` (file stems of *.json), sorted.
std::vector<std::string> known_ids(const std::filesystem::path& dir) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".json") ids.push_back(entry.path().stem().string());
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// Loads one profile file and checks that its id matches its file name, so lookups by id are unambiguous.
ModelProfile load_named(const std::filesystem::path& path) {
  ModelProfile p = load_profile(path);
  if (p.id != path.stem().string())
    throw Error(ErrorKind::Format, fmt::format("{}: field 'id': '{}' does not match the file name (expected '{}')",
                                               path.string(), p.id, path.stem().string()));
  return p;
}

}  // namespace

ModelProfile find_profile(const std::string& id, const std::filesystem::path& profiles_dir) {
  std::filesystem::path path = profiles_dir / (id + ".json");
  if (id.empty() || id.find('/') != std::string::npos || !std::filesystem::is_regular_file(path)) {
    auto ids = known_ids(profiles_dir);
    throw Error(ErrorKind::Missing,
                fmt::format("profile '{}' not found in {} (known: {})", id, profiles_dir.string(),
                            ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", "))));
  }
  return load_named(path);
}

std::vector<ModelProfile> list_profiles(const std::filesystem::path& profiles_dir) {
  if (!std::filesystem::is_directory(profiles_dir))
    throw Error(ErrorKind::Missing, fmt::format("{}: profiles directory not found", profiles_dir.string()));
  std::vector<ModelProfile> out;
  for (const std::string& id : known_ids(profiles_dir)) out.push_back(load_named(profiles_dir / (id + ".json")));
  return out;  // known_ids is sorted and ids equal stems, so this is sorted by id
}

std::filesystem::path default_profiles_dir() {
  if (const char* env = std::getenv("WSBENCH_PROFILES")) return env;
  if (std::filesystem::is_directory("models/profiles")) return std::filesystem::absolute("models/profiles");
  return WSBENCH_DEFAULT_PROFILES_DIR;
}

}  // namespace wsb
