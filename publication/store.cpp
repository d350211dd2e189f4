#include "publication/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "models/checkpoint/checkpoint.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

constexpr std::string_view kUpdatePrefix = "weight_v";

[[noreturn]] void throw_errno(const std::string& action, const std::filesystem::path& path) {
  throw Error(ErrorKind::Io, fmt::format("{} {}: {}", action, path.string(), std::strerror(errno)));
}

void fsync_path(const std::filesystem::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw_errno("open", path);
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    throw_errno("fsync", path);
  }
  ::close(fd);
}

void write_all(int fd, std::string_view text, const std::filesystem::path& path) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write", path);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

/// Exclusive flock(2) on a file, so concurrent advance_latest calls cannot both pass the forward-only check.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno("create", path);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd_);
        throw_errno("flock", path);
      }
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace

std::string version_string(uint32_t version) {
  if (version > 999999) {
    throw Error(ErrorKind::Format, fmt::format("version {} does not fit six digits", version));
  }
  return fmt::format("{:06d}", version);
}

uint32_t parse_version_string(std::string_view text, const std::string& what) {
  bool ok = text.size() == 6;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') ok = false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!ok) {
    throw Error(ErrorKind::Format, fmt::format("{}: expected a 6-digit version, got '{}'", what, text));
  }
  return value;
}

void fsync_directory(const std::filesystem::path& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

void fsync_file(const std::filesystem::path& file) { fsync_path(file, O_RDONLY); }

Store::Store(std::filesystem::path root) : root_(std::move(root)) {}

std::filesystem::path Store::update_dir(uint32_t version) const {
  return root_ / "updates" / (std::string(kUpdatePrefix) + version_string(version));
}

bool Store::has(uint32_t version) const {
  std::error_code ec;
  return std::filesystem::is_regular_file(update_dir(version) / kIndexFileName, ec);
}

std::vector<uint32_t> Store::versions() const {
  std::vector<uint32_t> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(root_ / "updates", ec);
  if (ec) return out;  // no updates/ yet: nothing published
  for (const auto& child : it) {
    std::string name = child.path().filename().string();
    // Temp directories of publications being written start with '.', so they never match.
    if (name.size() != kUpdatePrefix.size() + 6 || !name.starts_with(kUpdatePrefix)) continue;
    std::string_view digits = std::string_view(name).substr(kUpdatePrefix.size());
    if (digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
    uint32_t version = parse_version_string(digits, name);
    if (has(version)) out.push_back(version);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<uint32_t> Store::latest() const {
  std::filesystem::path path = root_ / "latest";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    throw Error(ErrorKind::Io, fmt::format("cannot read {}", path.string()));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  // The pointer is written as six digits and a newline; accept a missing final newline from hand edits.
  if (!content.empty() && content.back() == '\n') content.pop_back();
  return parse_version_string(content, path.string());
}

void Store::advance_latest(uint32_t version) const {
  std::string text = version_string(version) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (ec) throw Error(ErrorKind::Io, fmt::format("create directory {}: {}", root_.string(), ec.message()));
  FileLock lock(root_ / ".latest.lock");
  std::optional<uint32_t> current = latest();
  if (current && version < *current) {
    throw Error(ErrorKind::Lineage,
                fmt::format("{}: cannot move latest back from {} to {} (forward only)", (root_ / "latest").string(),
                            version_string(*current), version_string(version)));
  }
  if (current && version == *current) return;
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path tmp = root_ / fmt::format(".latest.tmp-{}-{}", ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("create", tmp);
  try {
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0) throw_errno("fsync", tmp);
  } catch (...) {
    ::close(fd);
    std::filesystem::remove(tmp, ec);
    throw;
  }
  ::close(fd);
  // rename(2) replaces the pointer atomically: a reader sees the old or the new version, never a partial file.
  if (::rename(tmp.c_str(), (root_ / "latest").c_str()) != 0) {
    int saved = errno;
    std::filesystem::remove(tmp, ec);
    errno = saved;
    throw_errno("rename into", root_ / "latest");
  }
  fsync_directory(root_);
}

}  // namespace wsb
