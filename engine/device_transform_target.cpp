#include "engine/device_transform_target.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/quant/nvfp4_swizzle_device.hpp"
#include "core/errors.hpp"
#include "models/transform/nvfp4.hpp"

namespace wsb {
namespace {

bool device_transform(const RuntimeStorageSpec& spec) {
  return spec.transform == kNvfp4ScaleSwizzle && spec.gathered_shape.size() == 3;
}

}  // namespace

bool DeviceTransformTarget::needed(const std::vector<RankLayout>& layouts) {
  for (const auto& layout : layouts) {
    if (std::any_of(layout.storages.begin(), layout.storages.end(), device_transform)) return true;
  }
  return false;
}

DeviceTransformTarget::DeviceTransformTarget(DeviceStorages& storages, const std::vector<RankLayout>& layouts,
                                             uint64_t budget_bytes)
    : storages_(storages), views_(storages.views()) {
  std::map<int, uint64_t> budgets;
  for (size_t r = 0; r < layouts.size(); ++r) {
    for (const auto& spec : layouts[r].storages) {
      if (!device_transform(spec)) continue;
      const uint64_t least = nvfp4_swizzle_min_budget(spec.gathered_shape[1], spec.gathered_shape[2]);
      uint64_t& budget = budgets[storages_.device_of(static_cast<int>(r))];
      budget = std::max({budget, budget_bytes, least});
    }
  }
  for (const auto& [device, budget] : budgets) {
    PerDevice& d = devices_[device];
    d.staging = std::make_unique<DeviceStaging>(budget, device);
    d.stream = cuda_ops::stream_create(device, fmt::format("device transform stream on device {}", device));
  }
}

DeviceTransformTarget::~DeviceTransformTarget() {
  for (auto& [device, d] : devices_) cuda_ops::stream_destroy(device, d.stream);
}

uint64_t DeviceTransformTarget::staging_bytes() const {
  uint64_t total = 0;
  for (const auto& [device, d] : devices_) total += d.staging->budget_bytes();
  return total;
}

bool DeviceTransformTarget::transforms_on_device(const RuntimeStorageSpec& spec) const {
  return device_transform(spec);
}

void DeviceTransformTarget::write_transformed(int rank, size_t index, const RuntimeStorageSpec& spec,
                                              std::span<const uint8_t> gathered) {
  if (!device_transform(spec)) StorageTarget::write_transformed(rank, index, spec, gathered);
  if (gathered.size() != spec.gathered_bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}' of rank {}: {} gathered bytes, {} {} needs {}",
                                                 spec.name, rank, gathered.size(), dtype_name(spec.dtype),
                                                 shape_string(spec.gathered_shape), spec.gathered_bytes()));
  }
  const DeviceRankView& view = views_.at(static_cast<size_t>(rank));
  if (view.bytes.at(index) != spec.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("storage '{}' of rank {}: the device storage has {} bytes, the "
                                                 "layout says {}",
                                                 spec.name, rank, view.bytes[index], spec.bytes()));
  }
  PerDevice& d = devices_.at(view.device);
  // The storages are written through this const view only here: the commit owns them for the pause.
  auto* live = const_cast<uint8_t*>(view.storages[index]);
  nvfp4_scale_swizzle_device(gathered.data(), spec.gathered_shape[0], spec.gathered_shape[1], spec.gathered_shape[2],
                             live, *d.staging, static_cast<cudaStream_t>(d.stream));
}

}  // namespace wsb
