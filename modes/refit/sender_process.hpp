#pragma once
// The trainer side of a cross-process refit: the sender ranks run on threads of a child process forked from the
// engine's, so every bucket really crosses a process boundary through the transport's shared memory (which must be
// mapped MAP_SHARED before the fork). The child inherits the trainer simulator's weights copy-on-write and only
// reads them; it never touches CUDA (the parent's context is not valid in a forked child) and leaves with _exit.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace wsb::refit {

class SenderProcess {
 public:
  /// Forks; the child runs send(rank) for every rank in [0, ranks) on its own thread, then _exit(0), or _exit(1)
  /// when any send threw (send reports its error through the transport first). Throws Error(Io) naming errno when
  /// fork fails.
  SenderProcess(int ranks, const std::function<void(int rank)>& send);
  /// Starts `exe` with `args` (argv[1..]) as a fresh process (posix_spawn: no copy of this process's threads or
  /// CUDA context, which a forked child could not use), the environment inherited, and `fds[i]` open as fd 3 + i
  /// in the child (the parent's stay open), and nothing else of this process's beyond 0-2; with `stderr_fd` >= 0 the
  /// child's stderr goes there. Throws Error(Io) naming the executable and errno when it cannot start.
  SenderProcess(const std::filesystem::path& exe, const std::vector<std::string>& args, const std::vector<int>& fds,
                int stderr_fd = -1);
  /// Kills the child (SIGKILL) when it still runs, and reaps it. Never throws.
  ~SenderProcess();
  SenderProcess(const SenderProcess&) = delete;
  SenderProcess& operator=(const SenderProcess&) = delete;

  /// True while the child has not exited (thread-safe; a transport's peer-liveness check).
  bool alive();
  /// Waits for the child. Throws Error(Io, "refit: sender process <pid> exited with status N" / "was killed by
  /// signal S") unless it exited with status 0.
  void join();
  pid_t pid() const { return pid_; }

 private:
  bool reap(bool wait);  // true once reaped; mu_ held

  pid_t pid_ = -1;
  std::mutex mu_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace wsb::refit
