#pragma once
// One engine server process of a trial: started in its own process group with stdout and stderr in a log file,
// watched for an early exit, stopped with SIGTERM and, when it hangs, SIGKILL.
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and released). Throws Error(Io).
int pick_free_port();

class ServerProcess {
 public:
  /// Starts `argv` (argv[0] a path, or a name looked up on PATH) with stdout and stderr appended to `log`.
  /// Throws Error(Io) naming the program when it cannot be started.
  ServerProcess(std::vector<std::string> argv, std::filesystem::path log);
  /// Stops the process (stop(5)) when still running.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::vector<std::string>& argv() const { return argv_; }
  const std::filesystem::path& log() const { return log_; }
  /// "" while it runs, else how it ended ("exited with status N", "killed by signal N (NAME)"). Reaps it.
  std::string exit_description();
  /// SIGTERM to its process group, up to `timeout_s` seconds for it to end, then SIGKILL. Returns
  /// {pid, stop: "sigterm" | "sigkill after <timeout_s> s" | "had exited", status: exit_description()}.
  nlohmann::json stop(double timeout_s);
  /// The last `bytes` of the log file ("" when unreadable).
  std::string log_tail(size_t bytes = 2000) const;

 private:
  std::vector<std::string> argv_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string ended_;
  nlohmann::json stopped_;
};

}  // namespace wsb
