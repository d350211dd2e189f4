#include "reports/gnuplot.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

extern char** environ;

namespace wsb {
namespace fs = std::filesystem;

std::optional<fs::path> find_program(const std::string& program) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos) {
    if (executable(program)) return fs::path(program);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (executable(candidate)) return candidate;
    start = colon + 1;
  }
  return std::nullopt;
}

std::string run_gnuplot(const fs::path& gnuplot_path, const fs::path& dir, const std::string& script_name) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return fmt::format("pipe: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  std::string program = fs::absolute(gnuplot_path).string();
  std::string script = script_name;
  char* argv[] = {program.data(), script.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(err_pipe[0]);
    return fmt::format("cannot start {}: {}", program, std::strerror(rc));
  }
  std::string err;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n > 0) {
      if (err.size() < 2000) err.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return fmt::format("waitpid: {}", std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) {
    if (err.size() > 2000) err.resize(2000);
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return fmt::format("exit status {}: {}", WEXITSTATUS(status), err);
  }
  return "";
}

}  // namespace wsb
