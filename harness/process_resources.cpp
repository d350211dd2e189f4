#include "harness/process_resources.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "harness/memory_sampler.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Resident pages of one file, in bytes.
uint64_t cached_bytes_of(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st{};
  uint64_t cached = 0;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const size_t size = static_cast<size_t>(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      const size_t page_bytes = page > 0 ? static_cast<size_t>(page) : 4096;
      std::vector<unsigned char> resident((size + page_bytes - 1) / page_bytes);
      if (::mincore(map, size, resident.data()) == 0) {
        for (size_t i = 0; i < resident.size(); ++i) {
          if (resident[i] & 1) cached += std::min(page_bytes, size - i * page_bytes);
        }
      }
      ::munmap(map, size);
    }
  }
  ::close(fd);
  return cached;
}

}  // namespace

uint64_t open_fd_count() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) throw Error(ErrorKind::Io, fmt::format("/proc/self/fd: {}", std::strerror(errno)));
  uint64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the descriptor opendir holds
}

std::optional<uint64_t> resident_bytes() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return statm_rss_bytes(read_text("/proc/self/statm"), page > 0 ? static_cast<uint64_t>(page) : 4096);
}

uint64_t page_cache_bytes(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  uint64_t total = 0;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) total += cached_bytes_of(it->path());
  }
  return total;
}

std::optional<uint64_t> host_page_cache_bytes() { return meminfo_bytes(read_text("/proc/meminfo"), "Cached"); }

}  // namespace wsb
