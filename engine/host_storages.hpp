#pragma once
// CPU-backend runtime storages: one arena per TP rank, allocated once, laid out like a rank image.
#include <cstdint>
#include <span>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/storage_target.hpp"

namespace wsb {

class HostStorages final : public StorageTarget {
 public:
  explicit HostStorages(const std::vector<RankLayout>& layouts);
  int tp() const override { return static_cast<int>(arenas_.size()); }
  void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) override;
  void synchronize() override {}
  Floor copy_floor() const override { return Floor::HostMemcpy; }

  std::span<uint8_t> storage(int rank, size_t index);
  std::span<const uint8_t> storage(int rank, size_t index) const;
  size_t storage_count(int rank) const { return offsets_[rank].size(); }
  /// Arena bytes of one rank (with alignment padding).
  uint64_t arena_bytes(int rank) const { return arenas_[rank].size(); }

 private:
  std::vector<HostBuffer> arenas_;
  std::vector<std::vector<uint64_t>> offsets_;
  std::vector<std::vector<uint64_t>> sizes_;
  std::vector<std::vector<std::string>> names_;
};

}  // namespace wsb
