#include "publisher/delta_spill.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

[[noreturn]] void io_error(const std::string& action, const std::filesystem::path& dir) {
  throw Error(ErrorKind::Io, fmt::format("delta spill file in {}: {}: {}", dir.string(), action, std::strerror(errno)));
}

/// Chunk the payloads are read back in: bounded memory whatever the payload sizes.
constexpr size_t kChunkBytes = 8u << 20;

}  // namespace

DeltaSpill::DeltaSpill(const std::filesystem::path& dir) : dir_(dir) {
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ >= 0) return;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) io_error("open (O_TMPFILE)", dir);
  std::string name = (dir / ".wsb-delta-spill-XXXXXX").string();
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) io_error("mkostemp", dir);
  ::unlink(name.c_str());  // unnamed from here on, as with O_TMPFILE
}

DeltaSpill::~DeltaSpill() {
  if (fd_ >= 0) ::close(fd_);
}

void DeltaSpill::add(const std::string& name, std::span<const uint8_t> payload, std::string checksum) {
  const uint8_t* p = payload.data();
  size_t left = payload.size();
  uint64_t at = size_;
  while (left > 0) {
    const ssize_t n = ::pwrite(fd_, p, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("write", dir_);
    p += n;
    left -= static_cast<size_t>(n);
    at += static_cast<uint64_t>(n);
  }
  items_.push_back(Item{name, size_, payload.size(), std::move(checksum)});
  size_ += payload.size();
}

void DeltaSpill::write_shards(PublicationWriter& writer, uint64_t max_shard_bytes) const {
  std::vector<uint64_t> sizes;
  for (const Item& item : items_) sizes.push_back(item.bytes);
  std::vector<uint8_t> chunk(std::min<uint64_t>(kChunkBytes, std::max<uint64_t>(size_, 1)));
  for (const auto& [begin, end] : split_shards(sizes, max_shard_bytes)) {
    std::vector<TensorSpec> specs;
    std::vector<std::string> checksums;
    for (size_t i = begin; i < end; ++i) {
      specs.push_back(TensorSpec{items_[i].name, DType::U8, {static_cast<int64_t>(items_[i].bytes)}});
      checksums.push_back(items_[i].checksum);
    }
    writer.begin_shard(std::move(specs), std::move(checksums));
    // The shard's payloads are contiguous in the spill file: read them back in order.
    uint64_t at = items_[begin].offset;
    const uint64_t stop = items_[end - 1].offset + items_[end - 1].bytes;
    while (at < stop) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), stop - at));
      const ssize_t n = ::pread(fd_, chunk.data(), want, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0) errno = EIO;
        io_error("read", dir_);
      }
      writer.append(std::span<const uint8_t>(chunk.data(), static_cast<size_t>(n)));
      at += static_cast<uint64_t>(n);
    }
    writer.end_shard();
  }
}

}  // namespace wsb
