#pragma once
// Reference forward pass on CUDA devices, reading the runtime storages in device memory (the CUDA backend's
// counterpart of models/forward/forward.hpp). Same contract: deterministic and batch-invariant (each sequence
// computed alone; every reduction in a fixed order; no atomics), TP partials reduced in rank order on the device of
// rank 0, weights dequantized inside the kernels from the runtime layout, never cached.
// The decode step of a sequence slot is captured once as a CUDA graph and replayed for every later token, so the
// storage addresses baked into the graph are load-bearing: a storage that moved would be read at its old address.
#include <memory>
#include <vector>

#include "engine/cuda/device_storages.hpp"
#include "models/forward/forward.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

struct DeviceForwardOptions {
  int max_sequences = 16;    ///< concurrent sequence slots (each owns device KV caches and a captured graph)
  int max_positions = 1024;  ///< tokens per sequence (prompt + generated)
  bool use_graphs = true;    ///< false: launch the kernels directly each step (debugging, comparison tests)
};

/// Creates the device forward for the profile's family. `layouts` = build_rank_layouts(profile, tp) and `views`
/// their device storages (DeviceStorages::views()). The views must outlive the model.
/// new_sequence() throws Error(Resource) when all slots are in use; step() throws Error(Format) for a token
/// outside [0, vocab), Error(Resource) past max_positions, Error(Io) naming the kernel on a CUDA failure.
/// Throws Error(Format) for a family without a device forward, Error(Mismatch) when views and layouts disagree;
/// Error(Resource) "built without CUDA" in a build without CUDA.
std::unique_ptr<ForwardModel> make_device_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                  const std::vector<DeviceRankView>& views,
                                                  const DeviceForwardOptions& options = {});

}  // namespace wsb
