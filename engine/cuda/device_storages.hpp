#pragma once
// CUDA backend runtime storages: one device arena per TP rank (cudaMalloc once, laid out like a rank image by
// storage_offsets, modes/sync/rank_image.hpp), rank r on device r % device_count (one GPU per rank when there
// are enough, ranks sharing a device otherwise). write() issues chunked cudaMemcpyAsync H2D copies spread
// round-robin over several streams of the rank's device; synchronize() waits for all of them.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/runtime_storages.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

struct DeviceStorageOptions {
  uint64_t chunk_bytes = 64ull << 20;  ///< H2D copy chunk (bytes)
  int copy_streams = 2;            ///< copy streams per TP rank
  int device_count = 0;                ///< devices to use; 0 = all visible
  /// Delta staging area per device for the device-delta commit, bytes, allocated by reserve_delta_staging (at the
  /// native load) or else at the first staging, outside any pause; 0 = kDefaultDeltaStagingShare of the device's
  /// memory.
  uint64_t delta_staging_bytes = 0;
};

/// Default share of a device's memory its delta staging area takes (1/16: 8.8 GB on an H200).
inline constexpr double kDefaultDeltaStagingShare = 1.0 / 16;

/// Device pointers to one rank's storages, index-aligned with RankLayout::storages.
struct DeviceRankView {
  int device = 0;
  std::vector<const uint8_t*> storages;  ///< device addresses
  std::vector<uint64_t> bytes;
};

/// RuntimeStorages on CUDA devices, plus what the device forward needs.
class DeviceStorages : public RuntimeStorages {
 public:
  virtual std::vector<DeviceRankView> views() const = 0;
  /// Device that rank `rank` lives on.
  virtual int device_of(int rank) const = 0;
};

/// Allocates every storage of every rank (cudaMalloc, one arena per rank, zero-filled). Throws Error(Resource)
/// before allocating anything when no CUDA device is present, or when a device lacks the memory: the message says
/// bytes needed and free per device. Without a CUDA build: Error(Resource) "built without CUDA".
std::unique_ptr<DeviceStorages> make_device_storages(const std::vector<RankLayout>& layouts,
                                                     const DeviceStorageOptions& options);

}  // namespace wsb
