#pragma once
// Running gnuplot (Debian package gnuplot-nox) as a child process on a generated script.
#include <filesystem>
#include <optional>
#include <string>

namespace wsb {

/// `program` when it contains a '/' and is an executable file, else the first executable `program` in a folder of
/// $PATH; nullopt when there is none.
std::optional<std::filesystem::path> find_program(const std::string& program);

/// Runs `gnuplot_path script_name` with `dir` as its working folder (scripts name their files relative to it),
/// stdin and stdout on /dev/null. Returns "" when it exited 0, else why not: "exit status N: <its stderr>" (stderr
/// cut at 2000 bytes), "killed by signal N", or the spawn error. Throws nothing.
std::string run_gnuplot(const std::filesystem::path& gnuplot_path, const std::filesystem::path& dir,
                        const std::string& script_name);

}  // namespace wsb
