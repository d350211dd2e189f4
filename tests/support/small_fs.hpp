#pragma once
// A small tmpfs a resource test mounts for itself (ENOSPC on demand), and a filler file that takes all but a
// chosen number of its bytes. Mounting needs root and a kernel/sandbox that allows it: SmallFs::mount returns why
// not instead, so the test can GTEST_SKIP with the reason (CI runners often forbid mount).
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace wsb::test {

class SmallFs {
 public:
  /// Mounts a tmpfs of `bytes` (rounded up to pages by the kernel) at `dir` (created). Returns nullptr and sets
  /// `why_not` when the machine does not allow it. The mount is made in a private mount namespace when the
  /// process may create one, so a crashed test leaves no mount behind.
  static std::unique_ptr<SmallFs> mount(const std::filesystem::path& dir, uint64_t bytes, std::string& why_not) {
    if (::geteuid() != 0) {
      why_not = "mounting a tmpfs needs root (euid " + std::to_string(::geteuid()) + ")";
      return nullptr;
    }
    static const bool private_namespace = [] {
      return ::unshare(CLONE_NEWNS) == 0 && ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    }();
    (void)private_namespace;
    std::filesystem::create_directories(dir);
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      why_not = "mount -t tmpfs -o " + options + " " + dir.string() + ": " + std::strerror(errno);
      return nullptr;
    }
    return std::unique_ptr<SmallFs>(new SmallFs(dir));
  }
  ~SmallFs() { ::umount2(dir_.c_str(), MNT_DETACH); }
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  /// Bytes an unprivileged writer can still allocate (statvfs f_bavail * f_frsize).
  uint64_t free_bytes() const {
    struct statvfs st{};
    if (::statvfs(dir_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

  /// Writes `name` with zeros until only `leave` bytes (a multiple of the page size) stay free. Returns its path.
  std::filesystem::path fill(const std::string& name, uint64_t leave) const {
    const std::filesystem::path path = dir_ / name;
    const uint64_t take = free_bytes() - leave;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const std::vector<char> zeros(1 << 16, 0);
    for (uint64_t done = 0; fd >= 0 && done < take;) {
      const ssize_t n = ::write(fd, zeros.data(), std::min<uint64_t>(zeros.size(), take - done));
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
    }
    if (fd >= 0) ::close(fd);
    return path;
  }

 private:
  explicit SmallFs(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
};

}  // namespace wsb::test
