#include "models/checkpoint/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

[[noreturn]] void throw_errno(int err, const std::filesystem::path& path, std::string_view what) {
  throw Error(err == ENOENT ? ErrorKind::Missing : ErrorKind::Io,
              fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

// Closes on scope exit so every error path releases the descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close() reports deferred write errors (NFS, quota), so writers check it.
  void close_checked(const std::filesystem::path& path) {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno(errno, path, "close");
  }

 private:
  int fd_;
};

}  // namespace

std::filesystem::path tmp_path_for(const std::filesystem::path& path) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  return tmp;
}

std::string read_text_file(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno(errno, path, "open");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "read");
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

void write_all(int fd, const void* data, size_t size, const std::filesystem::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "write");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void fsync_parent_dir(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno(errno, dir, "open directory");
  if (::fsync(fd.get()) != 0) throw_errno(errno, dir, "fsync directory");
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content, bool fsync_file) {
  const std::filesystem::path tmp = tmp_path_for(path);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw_errno(errno, tmp, "open for writing");
    try {
      write_all(fd.get(), content.data(), content.size(), tmp);
      if (fsync_file && ::fsync(fd.get()) != 0) throw_errno(errno, tmp, "fsync");
      fd.close_checked(tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, path, "rename from .tmp");
  }
  if (fsync_file) fsync_parent_dir(path);
}

}  // namespace wsb
