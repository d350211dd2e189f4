#pragma once
// What the built wsbench says it accepts: `wsbench <command...> --help` run and parsed (CLI11's help layout:
// a "Usage:" line naming the command path, then "Options:" rows "  -o,--out TEXT ..." and "Subcommands:" rows).
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace wsb::test {

/// The built executable under test (the docs tests depend on the wsbench target).
inline std::filesystem::path wsbench_exe() { return std::filesystem::path(WSBENCH_BINARY_DIR) / "wsbench"; }

struct Help {
  std::set<std::string> options;      ///< long option names, "--out"
  std::set<std::string> subcommands;  ///< listed ones ("table"); hidden subcommands are not listed
};

/// Runs a shell command line; returns its stdout and stderr together and sets `status` to the exit status.
inline std::string capture(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int raw = ::pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

/// Parses CLI11 help text. Returns nullopt unless its Usage line names exactly `path` after the program (CLI11
/// answers an unknown command with the top-level help, whose Usage line names none).
inline std::optional<Help> parse_help(const std::string& text, const std::vector<std::string>& path) {
  std::istringstream in(text);
  std::string line, section;
  bool usage_ok = false;
  Help help;
  while (std::getline(in, line)) {
    if (line.starts_with("Usage: ")) {
      std::istringstream words(line.substr(7));
      std::string program, word;
      words >> program;
      std::vector<std::string> named;
      while (words >> word && !word.starts_with("[") && word != "SUBCOMMAND") named.push_back(word);
      // Positionals follow the command path in the Usage line: compare the path's length only.
      usage_ok = program.ends_with("wsbench") && named.size() >= path.size() &&
                 std::equal(path.begin(), path.end(), named.begin());
      continue;
    }
    if (!line.empty() && line.back() == ':' && line.front() != ' ') {
      section = line;
      continue;
    }
    if (!line.starts_with("  ") || line.size() < 3 || line[2] == ' ') continue;  // a wrapped description
    std::istringstream row(line);
    std::string first;
    row >> first;
    if (section == "Options:") {
      std::istringstream names(first);
      for (std::string name; std::getline(names, name, ',');) {
        if (name.starts_with("--")) help.options.insert(name);
      }
    } else if (section == "Subcommands:") {
      help.subcommands.insert(first);
    }
  }
  if (!usage_ok) return std::nullopt;
  return help;
}

/// `wsbench <path...> --help`, run once per path.
class HelpCache {
 public:
  /// nullptr when wsbench has no such command (the help it prints is not that command's).
  const Help* get(const std::vector<std::string>& path) {
    auto it = cache_.find(path);
    if (it == cache_.end()) {
      std::string command = "'" + wsbench_exe().string() + "'";
      for (const std::string& word : path) command += " '" + word + "'";
      int status = 0;
      const std::string text = capture(command + " --help", status);
      std::optional<Help> help;
      if (status == 0) help = parse_help(text, path);
      it = cache_.emplace(path, std::move(help)).first;
    }
    return it->second ? &*it->second : nullptr;
  }
  /// Every command path asked for so far that exists.
  std::vector<std::vector<std::string>> known() const {
    std::vector<std::vector<std::string>> out;
    for (const auto& [path, help] : cache_) {
      if (help) out.push_back(path);
    }
    return out;
  }

 private:
  std::map<std::vector<std::string>, std::optional<Help>> cache_;
};

}  // namespace wsb::test
