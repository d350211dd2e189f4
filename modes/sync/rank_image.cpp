#include "modes/sync/rank_image.hpp"

namespace wsb {

std::vector<uint64_t> storage_offsets(const RankLayout& layout, uint64_t* total_bytes) {
  std::vector<uint64_t> offsets;
  offsets.reserve(layout.storages.size());
  uint64_t cursor = 0;
  for (const auto& storage : layout.storages) {
    cursor = align_up(cursor, kStorageAlignment);
    offsets.push_back(cursor);
    cursor += storage.bytes();
  }
  *total_bytes = align_up(cursor, kImageAlignment);
  return offsets;
}

RankImage::RankImage(const RankLayout& layout, const HostPinner* pinner) {
  uint64_t total = 0;
  offsets_ = storage_offsets(layout, &total);
  for (const auto& storage : layout.storages) {
    sizes_.push_back(storage.bytes());
    payload_bytes_ += storage.bytes();
  }
  buffer_ = HostBuffer(total, kImageAlignment, pinner);
}

std::span<uint8_t> RankImage::storage(size_t index) { return buffer_.span().subspan(offsets_.at(index), sizes_[index]); }

std::span<const uint8_t> RankImage::storage(size_t index) const {
  return buffer_.span().subspan(offsets_.at(index), sizes_[index]);
}

}  // namespace wsb
