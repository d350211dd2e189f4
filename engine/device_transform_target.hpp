#pragma once
// The commit target of the CUDA backend when some storage has a device transform: every call goes to the device
// storages, and NVFP4 block-scale storages are swizzled on the device from their gathered shards, straight into
// the live storage (models/transform/nvfp4.hpp "Device path", docs/design.md "bounded device staging"). The native load
// keeps the host transform, so the native-load equality check compares the two paths byte for byte.
#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include "engine/cuda/device_storages.hpp"
#include "engine/quant/device_staging.hpp"

namespace wsb {

class DeviceTransformTarget final : public StorageTarget {
 public:
  /// Default staging budget per device that holds a device-transformed storage, bytes (raised to the swizzle's
  /// minimum, two experts' gathered scales, when a storage needs more).
  static constexpr uint64_t kDefaultBudgetBytes = 64ull << 20;

  /// Allocates one DeviceStaging and one copy stream per device that holds a storage with a device transform
  /// (outside any pause). Throws what DeviceStaging throws (Error(Resource) naming bytes needed and free).
  DeviceTransformTarget(DeviceStorages& storages, const std::vector<RankLayout>& layouts,
                        uint64_t budget_bytes = kDefaultBudgetBytes);
  ~DeviceTransformTarget() override;

  /// True when some storage of `layouts` has a transform this target runs on the device.
  static bool needed(const std::vector<RankLayout>& layouts);
  /// Device staging bytes allocated, all devices.
  uint64_t staging_bytes() const;

  int tp() const override { return storages_.tp(); }
  void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) override {
    storages_.write(rank, index, offset, src);
  }
  void synchronize() override { storages_.synchronize(); }
  Floor copy_floor() const override { return storages_.copy_floor(); }
  bool transforms_on_device(const RuntimeStorageSpec& spec) const override;
  uint64_t delta_staging_bytes(int rank) const override { return storages_.delta_staging_bytes(rank); }
  int delta_staging_group(int rank) const override { return storages_.delta_staging_group(rank); }
  void reserve_delta_staging() override { storages_.reserve_delta_staging(); }
  uint64_t delta_address(int rank, size_t index) const override { return storages_.delta_address(rank, index); }
  uint64_t live_digest(int rank, size_t index) override { return storages_.live_digest(rank, index); }
  std::vector<uint64_t> live_digests(std::span<const StorageIndex> storages) override {
    return storages_.live_digests(storages);
  }
  void stage_packs(std::span<const StagedPack> packs) override { storages_.stage_packs(packs); }
  bool staged_deltas_intact() override { return storages_.staged_deltas_intact(); }
  void apply_staged_deltas() override { storages_.apply_staged_deltas(); }
  void corrupt_staged_delta(uint64_t offset) override { storages_.corrupt_staged_delta(offset); }
  /// NVFP4 scales: `gathered` is F8_E4M3 [E, M, K16] (pinned staging or pageable). Throws Error(Mismatch) when the
  /// gathered shape is not 3-D or the bytes disagree with it, Error(Io) on a CUDA failure.
  void write_transformed(int rank, size_t index, const RuntimeStorageSpec& spec,
                         std::span<const uint8_t> gathered) override;

 private:
  struct PerDevice {
    std::unique_ptr<DeviceStaging> staging;
    void* stream = nullptr;
  };
  DeviceStorages& storages_;
  std::vector<DeviceRankView> views_;
  std::map<int, PerDevice> devices_;
};

}  // namespace wsb
