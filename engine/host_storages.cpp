#include "engine/host_storages.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/sync/rank_image.hpp"

namespace wsb {

HostStorages::HostStorages(const std::vector<RankLayout>& layouts) {
  for (const auto& layout : layouts) {
    uint64_t total = 0;
    offsets_.push_back(storage_offsets(layout, &total));
    arenas_.emplace_back(total, kImageAlignment);
    auto& sizes = sizes_.emplace_back();
    auto& names = names_.emplace_back();
    for (const auto& s : layout.storages) {
      sizes.push_back(s.bytes());
      names.push_back(s.name);
    }
  }
}

std::span<uint8_t> HostStorages::storage(int rank, size_t index) {
  return arenas_.at(rank).span().subspan(offsets_[rank].at(index), sizes_[rank][index]);
}

std::span<const uint8_t> HostStorages::storage(int rank, size_t index) const {
  return arenas_.at(rank).span().subspan(offsets_[rank].at(index), sizes_[rank][index]);
}

void HostStorages::write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) {
  auto dst = storage(rank, index);
  if (offset > dst.size() || src.size() > dst.size() - offset) {
    throw Error(ErrorKind::Mismatch, fmt::format("rank {} storage '{}': write of {} bytes at {} exceeds {} bytes", rank,
                                                 names_[rank][index], src.size(), offset, dst.size()));
  }
  std::memcpy(dst.data() + offset, src.data(), src.size());
}

void HostStorages::read(int rank, size_t index, std::span<uint8_t> out) const {
  auto src = storage(rank, index);
  if (out.size() != src.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("rank {} storage '{}': read into {} bytes, the storage has {}", rank,
                                                 names_[rank][index], out.size(), src.size()));
  }
  std::memcpy(out.data(), src.data(), src.size());
}

uint64_t HostStorages::live_digest(int rank, size_t index) { return digest64(storage(rank, index)); }

void HostStorages::stage_packs(std::span<const StagedPack> packs) {
  pack_.clear();
  if (packs.size() > 1) {
    throw Error(ErrorKind::Mismatch, fmt::format("delta staging: {} packs for the one staging area", packs.size()));
  }
  if (packs.empty()) return;
  const StagedPack& p = packs.front();
  pack_counts(p.bytes);  // malformed packs are refused before they are staged
  if (p.bytes.size() > delta_capacity_) {
    throw Error(ErrorKind::Resource, fmt::format("delta staging: a pack of {} bytes exceeds the {} byte area",
                                                 p.bytes.size(), delta_capacity_));
  }
  std::vector<uint8_t> staged(p.bytes.begin(), p.bytes.end());
  if (digest64(staged) != p.digest) {
    throw Error(ErrorKind::Checksum, fmt::format("delta staging: the staged pack's digest differs from the {} bytes "
                                                 "uploaded",
                                                 staged.size()));
  }
  pack_digest_ = p.digest;
  pack_ = std::move(staged);
}

bool HostStorages::staged_deltas_intact() { return pack_.empty() || digest64(pack_) == pack_digest_; }

void HostStorages::apply_staged_deltas() {
  if (!pack_.empty()) apply_pack_on_host(pack_);
}

void HostStorages::corrupt_staged_delta(uint64_t offset) { pack_.at(offset) ^= 0x01; }

}  // namespace wsb
