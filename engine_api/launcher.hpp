#pragma once
// Runtime launchers: how a matrix cell's child process (`wsbench cell ...`) is started. Built in: `native` (direct
// exec, the runc-equivalent) and `gvisor` (`runsc --network=none do -force-overlay=false {cell}`); a matrix may
// define more under its top-level `launchers` field as command templates.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// The placeholder element of a launcher command that expands to the whole `wsbench cell ...` argument vector.
inline constexpr const char* kCellPlaceholder = "{cell}";

struct Launcher {
  std::string name;
  /// Command template: exactly one element is "{cell}"; "{out}" (the run's output folder, absolute) and "{self}"
  /// (the wsbench executable) are replaced inside any element. ["{cell}"] is a direct exec.
  std::vector<std::string> command;
  bool gpu = false;        ///< the started process can reach the host's CUDA devices
  std::string no_gpu_why;  ///< why not (reported as the reason a GPU cell is skipped)
  /// A server the launcher starts can be reached on the host's loopback (engine "http" needs it).
  bool network = true;
  std::string no_network_why;  ///< why not (reported as the reason an http cell is skipped)
  std::string install;     ///< what to install when the command's program is missing
};

/// The built-in launchers by name: native, gvisor.
const std::map<std::string, Launcher>& builtin_launchers();

/// Parses one user launcher: either an array of strings (the command) or an object {"command": [...], "gpu": bool,
/// "network": bool} ("gpu" defaults to false, "network" to true).
/// Throws Error(Format) naming `where` and the field: not an array of strings, no or several "{cell}" elements,
/// an empty program, unknown fields, a built-in name.
Launcher parse_launcher(const std::string& name, const nlohmann::json& j, const std::string& where);

/// The launcher's command with "{cell}" replaced by `cell_argv` and "{out}"/"{self}" substituted.
std::vector<std::string> expand_launcher(const Launcher& launcher, const std::vector<std::string>& cell_argv,
                                         const std::string& out_dir, const std::string& self);

/// The launcher's program (its command's first element) as an executable path: as given when it contains a '/',
/// else searched on $PATH. Empty when it is "{cell}" (direct exec). Throws Error(Missing) naming the launcher, the
/// program and what to install when it cannot be found or is not executable.
std::string resolve_launcher_program(const Launcher& launcher);

}  // namespace wsb
