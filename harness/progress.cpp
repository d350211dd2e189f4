#include "harness/progress.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace wsb {
namespace fs = std::filesystem;

fs::path progress_path_for(const fs::path& cell_out) { return fs::path(cell_out.string() + ".progress"); }

void ProgressFile::report(int trial, int trials, const std::string& phase) const {
  if (path_.empty()) return;
  const fs::path tmp = path_.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"trial", trial}, {"trials", trials}, {"phase", phase}}.dump() << "\n";
    if (!out) return;
  }
  std::error_code ec;
  fs::rename(tmp, path_, ec);
}

std::optional<CellProgress> read_progress(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("trial") || !j["trial"].is_number_integer() || !j.contains("trials") ||
      !j["trials"].is_number_integer() || !j.contains("phase") || !j["phase"].is_string()) {
    return std::nullopt;
  }
  return CellProgress{j["trial"].get<int>(), j["trials"].get<int>(), j["phase"].get<std::string>()};
}

}  // namespace wsb
