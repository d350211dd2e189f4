#include "modes/sync/checkpoint_files.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/errors.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

/// A full disk is a resource the user must free, not an I/O fault of the device.
ErrorKind kind_of(int err) { return err == ENOSPC || err == EDQUOT ? ErrorKind::Resource : ErrorKind::Io; }

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw Error(kind_of(err), fmt::format("{}: {}", what, std::strerror(err)));
}

}  // namespace

Fd::Fd(const fs::path& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw_errno(errno, fmt::format("open {}", path.string()));
}

Fd::~Fd() { ::close(fd_); }

void pwrite_all(int fd, std::span<const uint8_t> bytes, uint64_t offset, const fs::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw Error(kind_of(err), fmt::format("write {} at offset {}: {} after {} of {} bytes", path.string(), offset,
                                            std::strerror(err), done, bytes.size()));
    }
    done += static_cast<size_t>(n);
  }
}

void pread_all(int fd, std::span<uint8_t> bytes, uint64_t offset, const fs::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, fmt::format("read {} at offset {}", path.string(), offset + done));
    }
    if (n == 0) {
      throw Error(ErrorKind::Truncated, fmt::format("{}: ends at byte {}, {} bytes were expected at offset {}",
                                                    path.string(), offset + done, bytes.size(), offset));
    }
    done += static_cast<size_t>(n);
  }
}

void reserve_file(int fd, uint64_t bytes, const fs::path& path) {
  if (bytes == 0) return;
  if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return;
  const int err = errno;
  if (err == EOPNOTSUPP || err == ENOSYS) {
    if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) return;
    throw_errno(errno, fmt::format("reserve {} for {} bytes", path.string(), bytes));
  }
  throw Error(kind_of(err), fmt::format("reserve {}: {} for {} bytes", path.string(), std::strerror(err), bytes));
}

void WritebackWindow::written(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), SYNC_FILE_RANGE_WRITE);
  in_flight_.emplace_back(offset, bytes);
  while (in_flight_.size() > depth_) {
    settle(in_flight_.front());
    in_flight_.pop_front();
  }
}

void WritebackWindow::drain() {
  for (const auto& range : in_flight_) settle(range);
  in_flight_.clear();
}

void WritebackWindow::settle(std::pair<uint64_t, uint64_t> range) {
  const auto [offset, bytes] = range;
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

uint64_t copy_file_all(const fs::path& src, const fs::path& dst) {
  Fd in(src, O_RDONLY);
  struct stat st{};
  if (::fstat(in.get(), &st) != 0) throw_errno(errno, fmt::format("stat {}", src.string()));
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  Fd out(dst, O_WRONLY | O_CREAT | O_TRUNC);
  uint64_t done = 0;
  auto fail = [&](int err) {
    throw Error(kind_of(err), fmt::format("write {} (copy of {}): {} after {} of {} bytes", dst.string(), src.string(),
                                          std::strerror(err), done, total));
  };
  bool use_sendfile = true;
  std::vector<uint8_t> buffer;  // only where sendfile cannot copy file to file
  while (done < total) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(total - done, 1ull << 30));
    ssize_t n;
    if (use_sendfile) {
      off_t at = static_cast<off_t>(done);
      n = ::sendfile(out.get(), in.get(), &at, want);
      if (n < 0 && done == 0 && (errno == EINVAL || errno == ENOSYS)) {
        use_sendfile = false;
        continue;
      }
    } else {
      buffer.resize(std::min<size_t>(want, 1 << 20));
      n = ::pread(in.get(), buffer.data(), buffer.size(), static_cast<off_t>(done));
      if (n > 0) {
        pwrite_all(out.get(), std::span<const uint8_t>(buffer.data(), static_cast<size_t>(n)), done, dst);
      }
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    if (n == 0) {
      throw Error(ErrorKind::Truncated, fmt::format("copy {} to {}: the source ended after {} of {} bytes",
                                                    src.string(), dst.string(), done, total));
    }
    done += static_cast<uint64_t>(n);
  }
  return done;
}

void write_file_all(const fs::path& path, std::span<const uint8_t> bytes) {
  {
    Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC);
    pwrite_all(fd.get(), bytes, 0, path);
  }
  fsync_path(path, false);
}

void fsync_path(const fs::path& path, bool drop_cache) {
  Fd fd(path, O_RDONLY);
  if (::fsync(fd.get()) != 0) throw_errno(errno, fmt::format("fsync {}", path.string()));
  // Release the page cache so commit's reload reads the disk, as a native reload after a restart would.
  if (drop_cache) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

}  // namespace wsb
