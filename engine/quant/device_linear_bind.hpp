#pragma once
// C++20 glue between the checked host-side description of a linear layer (models/forward/quant_linear.hpp) and the
// plain DeviceLinear the device kernels take (engine/quant/device_linear.hpp): the storage checks stay in one place
// (dense_linear, dense_kmajor_linear, fp8_linear, nvfp4_linear, mxfp4_linear, which read only the specs), and the
// padded dims the kernels need come from the runtime storage specs.
#include "engine/cuda/device_storages.hpp"
#include "engine/quant/device_linear.hpp"
#include "models/forward/quant_linear.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

/// DeviceLinear of `linear` whose StorageRef::data are DEVICE addresses (bind them with the *_linear functions of
/// quant_linear.hpp, which check the specs and never dereference data; such a QuantLinear must not be passed to the
/// host linear_matvec). Padded dims: Fp8 weight [.., Kp, Np] and scale [.., Np]; Nvfp4 scale [E, Mp, Kp]; Mxfp4
/// weight [E, Np, Kb, 16] and scale [E, Mp / 32, Kp * 32]. Throws Error(Mismatch) naming the storage for an unbound
/// reference or a Dense dtype other than BF16/F16/F32.
DeviceLinear to_device_linear(const QuantLinear& linear);

/// The same for a `linear` bound to any copy of the rank's storages (e.g. host bytes for the CPU reference): each
/// storage is found in `layout` by its spec's name and its device address taken from `view` (index-aligned with
/// layout.storages, DeviceStorages::views()). Throws Error(Missing) for a storage not in the layout,
/// Error(Mismatch) "to_device_linear: storage '<name>' ..." when the view lacks it or its byte size differs from the
/// spec's.
DeviceLinear to_device_linear(const QuantLinear& linear, const RankLayout& layout, const DeviceRankView& view);

}  // namespace wsb
