#pragma once
// A rank image: a host copy of every runtime storage of one TP rank, laid out exactly as the engine lays out
// its storages (docs/design.md: 64 B aligned segments, 4 KiB aligned image).
#include <cstdint>
#include <span>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "modes/sync/host_buffer.hpp"

namespace wsb {

inline constexpr uint64_t kStorageAlignment = 64;   ///< bytes between storage segments
inline constexpr uint64_t kImageAlignment = 4096;   ///< base alignment of an image / storage arena

/// Byte offsets of each storage of `layout` inside one contiguous arena (shared by rank images and the engine's
/// storage arenas so both have the same layout). Returns offsets (size = storages) and writes the total.
std::vector<uint64_t> storage_offsets(const RankLayout& layout, uint64_t* total_bytes);

class RankImage {
 public:
  /// Allocates the image (zero-filled); pinned for its whole life when `pinner` is given. Throws as HostBuffer.
  explicit RankImage(const RankLayout& layout, const HostPinner* pinner = nullptr);
  bool pinned() const { return buffer_.pinned(); }
  std::span<uint8_t> storage(size_t index);
  std::span<const uint8_t> storage(size_t index) const;
  size_t storage_count() const { return offsets_.size(); }
  uint64_t bytes() const { return buffer_.size(); }
  /// Sum of storage bytes (without alignment padding).
  uint64_t payload_bytes() const { return payload_bytes_; }

 private:
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> sizes_;
  uint64_t payload_bytes_ = 0;
  HostBuffer buffer_;
};

}  // namespace wsb
