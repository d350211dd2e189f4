#include "modes/refit/sender_process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "models/core/errors.hpp"

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
