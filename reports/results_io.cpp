#include "reports/results_io.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reports/results_json.hpp"

namespace wsb {

Results load_results(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open: {}", name, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  try {
    return parse_results(j, name);
  } catch (const std::runtime_error& e) {
    // Cell and trial messages name the cell, not the file; the caller may be merging many files.
    const std::string msg = e.what();
    if (msg.rfind(name, 0) == 0) throw;
    throw std::runtime_error(fmt::format("{}: {}", name, msg));
  }
}

void save_results(const std::filesystem::path& path, const Results& results) {
  const std::string text = nlohmann::json(results).dump(2) + "\n";
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("{}: write failed: {}", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot replace with {}: {}", path.string(), tmp.string(), ec.message()));
}

}  // namespace wsb
