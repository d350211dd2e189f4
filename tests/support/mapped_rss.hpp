#pragma once
// The resident bytes of this process's mappings of one file, for tests of loaders that must not keep a checkpoint's
// mapped pages in the resident set.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace wsb::test {

/// Sum of the Rss lines of /proc/self/smaps over the mappings of `path` (bytes).
inline uint64_t mapped_rss(const std::filesystem::path& path) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string name = path.string();
  std::string line;
  bool in = false;
  uint64_t kb = 0;
  while (std::getline(smaps, line)) {
    const std::string first = line.substr(0, line.find(' '));
    if (first.empty() || first.back() != ':') {  // a mapping's header: "start-end perms offset dev inode path"
      in = line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0;
      continue;
    }
    if (in && first == "Rss:") {
      std::istringstream fields(line.substr(4));
      uint64_t v = 0;
      fields >> v;
      kb += v;
    }
  }
  return kb * 1024;
}

}  // namespace wsb::test
