#pragma once
// Teacher-forced logits of the reference forward over a token sequence, read from a checkpoint directory: what users
// and tests compare with transformers' forward of the same checkpoint (`wsbench forward`).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "models/profile/profile.hpp"

namespace wsb {

/// Loads `checkpoint` (the profile's canonical tensors, checked by expect_tensor) into fresh runtime storages of `tp`
/// ranks on `backend` ("cpu": host storages and the reference forward, models/forward/forward.hpp; "cuda": device
/// storages and the device forward with its captured graphs, engine/kernels/device_forward.hpp), through the same
/// loader and post-load transforms as the engine's native load, and feeds `tokens` one at a time to one sequence.
/// Row t of the result is the float32 logits over the whole vocabulary after tokens[0..t] (position t), as
/// transformers' teacher-forced forward returns them. Throws Error(Format) for an empty sequence, a token outside
/// [0, vocab) (naming it) or an unknown backend; build_rank_layouts' Error(Mismatch) when `tp` does not divide the
/// model; CheckpointReader's and expect_tensor's errors naming the file or tensor; Error(Resource) for the cuda backend
/// without a device or built without CUDA.
std::vector<std::vector<float>> teacher_forced_logits(const ModelProfile& profile,
                                                      const std::filesystem::path& checkpoint, int tp,
                                                      const std::string& backend, std::span<const int32_t> tokens);

}  // namespace wsb
