#pragma once
// File writes of the disk mode's mutable checkpoint. Every failure names the file and how many bytes of how many
// were written, so a full disk reads "No space left on device after 1048576 of 1769472 bytes" with the path.
#include <cstdint>
#include <deque>
#include <filesystem>
#include <span>
#include <utility>

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

/// Reads exactly `bytes.size()` bytes at `offset` of `fd` (the file `path`). Throws Error(Truncated) "<path>: ends
/// at byte E, N bytes were expected at offset O" when the file is shorter, Error(Io) naming the path otherwise.
void pread_all(int fd, std::span<uint8_t> bytes, uint64_t offset, const std::filesystem::path& path);

/// Gives `fd` (the file `path`) `bytes` of allocated space (fallocate(2); ftruncate where the filesystem cannot
/// allocate ahead), so a full disk fails here, before anything is computed, and parallel writers at scattered
/// offsets still get the file laid out in one piece. Throws Error(Resource) "reserve <path>: No space left on
/// device for N bytes" on ENOSPC/EDQUOT, Error(Io) otherwise.
void reserve_file(int fd, uint64_t bytes, const std::filesystem::path& path);

/// Streaming writes without a dirty-page build-up: each written range starts its writeback at once
/// (sync_file_range SYNC_FILE_RANGE_WRITE), and once more than `depth` ranges are in flight the oldest is waited for
/// and dropped from the page cache (the commit's reload then reads the disk, as a restarted engine would). Best
/// effort: errors of the hints are ignored, the caller's final fsync reports a failed write.
class WritebackWindow {
 public:
  WritebackWindow(int fd, size_t depth) : fd_(fd), depth_(depth) {}
  ~WritebackWindow() { drain(); }
  WritebackWindow(const WritebackWindow&) = delete;
  WritebackWindow& operator=(const WritebackWindow&) = delete;
  /// [offset, offset + bytes) was just written.
  void written(uint64_t offset, uint64_t bytes);
  /// Waits for every range in flight and drops it from the page cache.
  void drain();

 private:
  void settle(std::pair<uint64_t, uint64_t> range);
  int fd_;
  size_t depth_;
  std::deque<std::pair<uint64_t, uint64_t>> in_flight_;
};

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
