#pragma once
// CPU-backend runtime storages: one arena per TP rank, allocated once, laid out like a rank image.
#include <cstdint>
#include <span>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "modes/sync/host_buffer.hpp"
#include "engine/runtime_storages.hpp"

namespace wsb {

class HostStorages final : public RuntimeStorages {
 public:
  explicit HostStorages(const std::vector<RankLayout>& layouts);
  int tp() const override { return static_cast<int>(arenas_.size()); }
  void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) override;
  void synchronize() override {}
  Floor copy_floor() const override { return Floor::HostMemcpy; }
  std::string backend() const override { return "cpu"; }
  size_t storage_count(int rank) const override { return offsets_.at(rank).size(); }
  uint64_t storage_bytes(int rank, size_t index) const override { return sizes_.at(rank).at(index); }
  uintptr_t address(int rank, size_t index) const override {
    return reinterpret_cast<uintptr_t>(storage(rank, index).data());
  }
  void read(int rank, size_t index, std::span<uint8_t> out) const override;
  void flip_byte(int rank, size_t index, uint64_t offset) override { storage(rank, index)[offset] ^= 0x01; }

  /// Delta staging on the CPU backend: one host area (group 0) of `bytes`, so the whole device-delta path runs
  /// and is tested without a GPU. 0 (the default) disables it.
  void set_delta_staging_bytes(uint64_t bytes) { delta_capacity_ = bytes; }
  uint64_t delta_staging_bytes(int) const override { return delta_capacity_; }
  int delta_staging_group(int) const override { return 0; }
  uint64_t delta_address(int rank, size_t index) const override { return address(rank, index); }
  uint64_t live_digest(int rank, size_t index) override;
  void stage_packs(std::span<const StagedPack> packs) override;
  bool staged_deltas_intact() override;
  void apply_staged_deltas() override;
  void corrupt_staged_delta(uint64_t offset) override;

  std::span<uint8_t> storage(int rank, size_t index);
  std::span<const uint8_t> storage(int rank, size_t index) const;
  /// Arena bytes of one rank (with alignment padding).
  uint64_t arena_bytes(int rank) const { return arenas_[rank].size(); }

 private:
  std::vector<HostBuffer> arenas_;
  std::vector<std::vector<uint64_t>> offsets_;
  std::vector<std::vector<uint64_t>> sizes_;
  std::vector<std::vector<std::string>> names_;
  uint64_t delta_capacity_ = 0;
  std::vector<uint8_t> pack_;  ///< the staged pack (empty: nothing staged)
  uint64_t pack_digest_ = 0;
};

}  // namespace wsb
