#pragma once
// A forked child process for the cross-process refit tests. fork() is called from the test body; the child runs one
// function and _exits -- it never returns into gtest (no second copy of the test run, no flushed duplicate output)
// -- and reports an Error it threw through a pipe, so the parent can assert its kind and exact text.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "core/errors.hpp"
#include "modes/refit/shm_transport.hpp"

namespace wsb::refit::test {

/// Exit codes of the child.
inline constexpr int kChildReturned = 0;  ///< fn returned
inline constexpr int kChildError = 1;     ///< fn threw wsb::Error (kind and text reported)
inline constexpr int kChildOther = 2;     ///< fn threw something else

/// How the child ended: exited with `code`, or killed by `signal`; `error` is "<kind>: <text>" of its Error.
struct ChildOutcome {
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string error;
  bool operator==(const ChildOutcome&) const = default;
};

inline void PrintTo(const ChildOutcome& o, std::ostream* os) {
  *os << "{exited " << o.exited << ", code " << o.code << ", signal " << o.signal << ", error \"" << o.error
      << "\"}";
}

/// Liveness of this process's parent as seen from a child: true until the parent exits (the child is then
/// re-parented). Call it in the child.
inline PeerAlive parent_alive() {
  const pid_t parent = getppid();
  return [parent] { return getppid() == parent; };
}

class ChildProcess {
 public:
  /// Forks; the child runs `fn` and _exits with kChildReturned, kChildError or kChildOther. Call from the thread
  /// that outlives the child (the test body): the child is killed when that thread exits.
  explicit ChildProcess(const std::function<void()>& fn) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      close(fds[0]);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a parent killed by the hang guard must not leave the child behind
      if (getppid() != parent) _exit(kChildOther);
      int code = kChildReturned;
      std::string report;
      try {
        fn();
      } catch (const Error& e) {
        code = kChildError;
        report = std::string(error_kind_name(e.kind())) + ": " + e.what();
      } catch (...) {
        code = kChildOther;
      }
      if (!report.empty() && write(fds[1], report.data(), report.size()) < 0) code = kChildOther;
      _exit(code);
    }
    close(fds[1]);
    read_fd_ = fds[0];
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  /// A child still running (a test that failed early) is killed and reaped.
  ~ChildProcess() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(read_fd_);
  }

  pid_t pid() const { return pid_; }
  /// True until the child exits; never reaps it (waitid WNOWAIT), so it can serve as a transport's PeerAlive.
  bool alive() const {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
    return info.si_pid == 0;
  }
  /// A PeerAlive for this child.
  PeerAlive liveness() const {
    return [this] { return alive(); };
  }
  void kill(int sig) const { ::kill(pid_, sig); }
  /// Waits for the child to end, reaps it and reads its report.
  ChildOutcome wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    ChildOutcome o;
    o.exited = WIFEXITED(status);
    o.code = o.exited ? WEXITSTATUS(status) : -1;
    o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    char buf[4096];
    ssize_t n = 0;
    while ((n = read(read_fd_, buf, sizeof buf)) > 0) o.error.append(buf, static_cast<size_t>(n));
    return o;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool reaped_ = false;
};

/// The outcome of a child that exited normally with `code` and reported `error` ("" for none).
inline ChildOutcome exited_with(int code, std::string error = "") {
  return ChildOutcome{.exited = true, .code = code, .signal = 0, .error = std::move(error)};
}

/// The outcome of a child killed by `sig`.
inline ChildOutcome killed_by(int sig) { return ChildOutcome{.exited = false, .code = -1, .signal = sig, .error = ""}; }

}  // namespace wsb::refit::test
