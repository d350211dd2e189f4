#include "models/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "models/checkpoint/safetensors_header.hpp"

namespace wsb {
namespace {

[[noreturn]] void throw_os(int err, const std::filesystem::path& path, std::string_view what) {
  throw Error(err == ENOENT ? ErrorKind::Missing : ErrorKind::Io,
              fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

// Header length field of the spec: 8 bytes, little-endian, independent of the host byte order.
uint64_t read_le_u64(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_os(errno, path, "open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw_os(err, path, "fstat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, fmt::format("{}: not a regular file", path.string()));
  }
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ > 0) {
    // MAP_PRIVATE + PROT_READ: readers can never write through to a published checkpoint.
    void* map = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      map_size_ = 0;
      throw_os(err, path, "mmap");
    }
    map_ = static_cast<const uint8_t*>(map);
  }
  ::close(fd);  // the mapping keeps the file alive
  try {
    const uint64_t file_size = map_size_;
    if (file_size < 8) {
      throw Error(ErrorKind::Truncated,
                  fmt::format("{}: file is {} bytes, shorter than the 8-byte header length", path.string(),
                              file_size));
    }
    const uint64_t header_size = read_le_u64(map_);
    // The limit is checked first: a huge length is a malformed file, not one still being written.
    if (header_size > kSafetensorsMaxHeaderBytes) {
      throw Error(ErrorKind::Format, fmt::format("{}: header length {} exceeds the limit of {} bytes", path.string(),
                                                 header_size, kSafetensorsMaxHeaderBytes));
    }
    if (header_size > file_size - 8) {
      throw Error(ErrorKind::Truncated,
                  fmt::format("{}: header length {} extends beyond end of file (file is {} bytes)", path.string(),
                              header_size, file_size));
    }
    data_start_ = 8 + header_size;
    SafetensorsHeader header = parse_safetensors_header(
        std::string_view(reinterpret_cast<const char*>(map_) + 8, header_size), path);
    const uint64_t available = file_size - data_start_;
    if (header.data_size > available) {
      throw Error(ErrorKind::Truncated,
                  fmt::format("{}: data end {} lies beyond end of file (data buffer holds {} bytes)", path.string(),
                              header.data_size, available));
    }
    if (header.data_size < available) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: data buffer has {} trailing bytes unused by any tensor (last data_offsets end {}, "
                              "buffer {} bytes)",
                              path.string(), available - header.data_size, header.data_size, available));
    }
    entries_ = std::move(header.entries);
    metadata_ = std::move(header.metadata);
    for (size_t i = 0; i < entries_.size(); ++i) by_name_.emplace(entries_[i].name, i);
  } catch (...) {
    if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_size_);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsFile::at(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr) {
    throw Error(ErrorKind::Missing, fmt::format("{}: tensor '{}' not found", path_.string(), name));
  }
  return *entry;
}

std::span<const uint8_t> SafetensorsFile::data(const SafetensorsEntry& entry) const {
  // Guards against an entry taken from another file: its offsets may not fit this mapping.
  if (entry.begin > entry.end || data_start_ + entry.end > map_size_) {
    throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' data_offsets [{}, {}] lie outside this file",
                                               path_.string(), entry.name, entry.begin, entry.end));
  }
  return {map_ + data_start_ + entry.begin, static_cast<size_t>(entry.bytes())};
}

namespace {

/// madvise over the whole pages covering [begin, end) of a read-only file mapping. Rounding outward is safe there:
/// dropping a neighbour's page costs at most a refault from the page cache, never data.
void advise_pages(const uint8_t* map, size_t map_size, uint64_t begin, uint64_t end, int advice) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  begin = begin / page * page;
  end = std::min<uint64_t>((end + page - 1) / page * page, map_size);
  if (end > begin) ::madvise(const_cast<uint8_t*>(map) + begin, end - begin, advice);
}

}  // namespace

void SafetensorsFile::release(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr || map_ == nullptr || entry->bytes() == 0) return;
  advise_pages(map_, map_size_, data_start_ + entry->begin, data_start_ + entry->end, MADV_DONTNEED);
}

void SafetensorsFile::prefetch(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  if (entry == nullptr || map_ == nullptr || entry->bytes() == 0) return;
  advise_pages(map_, map_size_, data_start_ + entry->begin, data_start_ + entry->end, MADV_WILLNEED);
}

}  // namespace wsb
