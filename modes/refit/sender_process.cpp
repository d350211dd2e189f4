#include "modes/refit/sender_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "core/errors.hpp"

namespace wsb::refit {

SenderProcess::SenderProcess(int ranks, const std::function<void(int rank)>& send) {
  pid_ = fork();
  if (pid_ < 0) {
    throw Error(ErrorKind::Io, fmt::format("refit: cannot fork the sender process: {}", std::strerror(errno)));
  }
  if (pid_ == 0) {
    std::atomic<bool> failed{false};
    {
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
          try {
            send(r);
          } catch (...) {
            failed = true;
          }
        });
      }
      for (auto& t : threads) t.join();
    }
    _exit(failed ? 1 : 0);  // no destructors, no atexit handlers of the parent's state
  }
}

SenderProcess::SenderProcess(const std::filesystem::path& exe, const std::vector<std::string>& args,
                             const std::vector<int>& fds, int stderr_fd) {
  const auto fail = [&exe](const char* what, int error) {
    return Error(ErrorKind::Io, fmt::format("refit: cannot start the sender process {}: {}: {}", exe.string(), what,
                                            std::strerror(error)));
  };
  // Copies above the target range first, so that dup2 onto 3 + i never clobbers a source still to be moved.
  const int first_free = 3 + static_cast<int>(fds.size());
  std::vector<int> high;
  const auto close_high = [&high] {
    for (int fd : high) close(fd);
  };
  for (int fd : fds) {
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, first_free);
    if (copy < 0) {
      const int error = errno;
      close_high();
      throw fail("fcntl(F_DUPFD_CLOEXEC)", error);
    }
    high.push_back(copy);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (size_t i = 0; i < high.size(); ++i) {
    posix_spawn_file_actions_adddup2(&actions, high[i], 3 + static_cast<int>(i));  // dup2 clears close-on-exec
  }
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
  // Nothing else of this process's: pipes and sockets opened without close-on-exec stay out of the child (glibc
  // 2.34's closefrom action).
  posix_spawn_file_actions_addclosefrom_np(&actions, first_free);
  std::vector<std::string> argv_strings{exe.string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int error = posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close_high();
  if (error != 0) {
    pid_ = -1;
    throw fail("posix_spawn", error);
  }
}

SenderProcess::~SenderProcess() {
  std::lock_guard lock(mu_);
  if (pid_ > 0 && !reap(false)) {
    kill(pid_, SIGKILL);
    reap(true);
  }
}

bool SenderProcess::reap(bool wait) {
  if (reaped_) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, wait ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    reaped_ = true;
    status_ = r == pid_ ? status : 0;
  }
  return reaped_;
}

bool SenderProcess::alive() {
  std::lock_guard lock(mu_);
  return !reap(false);
}

void SenderProcess::join() {
  std::lock_guard lock(mu_);
  reap(true);
  if (WIFEXITED(status_) && WEXITSTATUS(status_) == 0) return;
  if (WIFSIGNALED(status_)) {
    throw Error(ErrorKind::Io, fmt::format("refit: sender process {} was killed by signal {}", pid_, WTERMSIG(status_)));
  }
  throw Error(ErrorKind::Io, fmt::format("refit: sender process {} exited with status {}", pid_, WEXITSTATUS(status_)));
}

}  // namespace wsb::refit
