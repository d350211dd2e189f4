#include "engine_api/launcher.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/errors.hpp"

namespace wsb {
namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", where, what));
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

bool executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

const std::map<std::string, Launcher>& builtin_launchers() {
  static const std::map<std::string, Launcher> launchers{
      {"native", Launcher{"native", {kCellPlaceholder}, true, "", true, "", ""}},
      {"gvisor",
       Launcher{"gvisor",
                {"runsc", "--network=none", "do", "-force-overlay=false", kCellPlaceholder},
                false,
                "runsc has no GPU proxy here: CUDA is not reachable inside the gVisor sandbox",
                false,
                "runsc --network=none: a server inside the sandbox has no network the harness can reach",
                "gVisor's runsc (Debian package 'runsc': apt-get install runsc, or scripts/install-deps.sh), run as "
                "root"}},
  };
  return launchers;
}

Launcher parse_launcher(const std::string& name, const nlohmann::json& j, const std::string& where_in) {
  const std::string where = fmt::format("{}: launcher '{}'", where_in, name);
  if (builtin_launchers().contains(name)) fail(where, "is built in and cannot be redefined");
  if (name.empty()) fail(where_in, "a launcher name must not be empty");
  Launcher l;
  l.name = name;
  const nlohmann::json* command = &j;
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (key != "command" && key != "gpu" && key != "network")
        fail(where, fmt::format("unknown field '{}' (command, gpu, network)", key));
    }
    if (!j.contains("command")) fail(where, "field 'command' is required");
    command = &j["command"];
    if (j.contains("gpu")) {
      if (!j["gpu"].is_boolean()) fail(where, fmt::format("field 'gpu' must be true or false, got {}", j["gpu"].dump()));
      l.gpu = j["gpu"].get<bool>();
    }
    if (j.contains("network")) {
      if (!j["network"].is_boolean())
        fail(where, fmt::format("field 'network' must be true or false, got {}", j["network"].dump()));
      l.network = j["network"].get<bool>();
    }
  }
  if (!command->is_array() || command->empty()) {
    fail(where, "the command must be a non-empty array of strings (one element \"{cell}\")");
  }
  int cells = 0;
  for (const auto& e : *command) {
    if (!e.is_string()) fail(where, fmt::format("command elements must be strings, got {}", e.dump()));
    l.command.push_back(e.get<std::string>());
    if (l.command.back() == kCellPlaceholder) ++cells;
  }
  if (cells != 1) {
    fail(where, fmt::format("the command must have exactly one element \"{{cell}}\" (the wsbench cell argv), has {}",
                            cells));
  }
  if (l.command.front().empty()) fail(where, "the command's program (first element) is empty");
  if (!l.gpu) l.no_gpu_why = fmt::format("launcher '{}' does not declare GPU access (\"gpu\": true)", name);
  if (!l.network) l.no_network_why = fmt::format("launcher '{}' declares no network (\"network\": false)", name);
  l.install = fmt::format("the program of launcher '{}'", name);
  return l;
}

std::vector<std::string> expand_launcher(const Launcher& launcher, const std::vector<std::string>& cell_argv,
                                         const std::string& out_dir, const std::string& self) {
  std::vector<std::string> argv;
  for (const auto& element : launcher.command) {
    if (element == kCellPlaceholder) {
      argv.insert(argv.end(), cell_argv.begin(), cell_argv.end());
      continue;
    }
    std::string e = element;
    replace_all(e, "{out}", out_dir);
    replace_all(e, "{self}", self);
    argv.push_back(std::move(e));
  }
  return argv;
}

std::string resolve_launcher_program(const Launcher& launcher) {
  const std::string& program = launcher.command.front();
  if (program == kCellPlaceholder || program == "{self}") return "";
  if (program.find('/') != std::string::npos) {
    if (executable(program)) return program;
    throw Error(ErrorKind::Missing, fmt::format("runtime '{}' needs '{}', which is missing or not executable: install {}",
                                                launcher.name, program, launcher.install));
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const auto candidate = std::filesystem::path(dir) / program;
    if (executable(candidate)) return candidate.string();
  }
  throw Error(ErrorKind::Missing, fmt::format("runtime '{}' needs '{}', which is not on PATH: install {}", launcher.name,
                                              program, launcher.install));
}

}  // namespace wsb
