#pragma once
// File writes of the disk mode's mutable checkpoint. Every failure names the file and how many bytes of how many
// were written, so a full disk reads "No space left on device after 1048576 of 1769472 bytes" with the path.
#include <cstdint>
#include <filesystem>
#include <span>

namespace wsb {

/// Owns a file descriptor (O_CLOEXEC). Throws Error(Io) naming the path when open(2) fails.
class Fd {
 public:
  Fd(const std::filesystem::path& path, int flags);
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Writes all of `bytes` at `offset` of `fd` (the file `path`). Throws Error(Resource) on ENOSPC/EDQUOT,
/// Error(Io) otherwise; the message names the path, the offset and the bytes written of `bytes.size()`.
void pwrite_all(int fd, std::span<const uint8_t> bytes, uint64_t offset, const std::filesystem::path& path);

/// Copies `src` to `dst` (created or truncated) in the kernel (sendfile). Returns the bytes copied. Throws
/// Error(Resource) on ENOSPC/EDQUOT, Error(Io) otherwise, Error(Truncated) when `src` ends before its size;
/// the message names both files and the bytes written of the total.
uint64_t copy_file_all(const std::filesystem::path& src, const std::filesystem::path& dst);

/// Replaces `path` with `bytes` (written, fsynced), as pwrite_all reports failures.
void write_file_all(const std::filesystem::path& path, std::span<const uint8_t> bytes);

/// fsync(2) of a file or directory; `drop_cache` then releases its page cache (POSIX_FADV_DONTNEED). Throws
/// Error(Io) naming the path.
void fsync_path(const std::filesystem::path& path, bool drop_cache);

}  // namespace wsb
