#pragma once
// NVFP4 block-scale swizzle on the device (the "Device path" of models/transform/nvfp4.hpp): the gathered E4M3
// scales [E, M, K16] (row-major, as the loader gathers them) go to the device through bounded staging and a kernel
// writes every byte of the runtime tensor [E, Mp, Kp] (Mp = round_up(M, 128), Kp = round_up(K16, 4)) in the 128x4
// tile order of nvfp4_scale_offset, padding zero. Byte-for-byte the output of the host transform
// nvfp4_scale_swizzle_transform, so reloading into a dirty storage gives the same bytes. C++17, no CUDA headers.
#include <cstdint>

#include "engine/quant/device_linear.hpp"  // cudaStream_t
#include "engine/quant/device_staging.hpp"

namespace wsb {

/// Gathered bytes of one expert (M * K16; 0 when either is not positive), the unit a staging half must hold.
inline uint64_t nvfp4_swizzle_expert_bytes(int64_t m, int64_t k16) {
  return m > 0 && k16 > 0 ? static_cast<uint64_t>(m) * static_cast<uint64_t>(k16) : 0;
}
/// The smallest staging budget that can run a swizzle of [., M, K16]: both halves hold one expert's gathered bytes.
inline uint64_t nvfp4_swizzle_min_budget(int64_t m, int64_t k16) { return 2 * nvfp4_swizzle_expert_bytes(m, k16); }

/// Swizzles host scales `gathered_host` (F8_E4M3 [E, M, K16] row-major, pinned or pageable) into the device tensor
/// `runtime_device` ([E, Mp, Kp] swizzled, on staging.device()). Experts go in chunks of
/// floor(half / (M * K16)) through the two staging halves alternately: chunk i + 1's H2D (on the staging's copy
/// stream; a pageable source is first copied into the pinned bounce half) overlaps chunk i's kernel (on `stream`,
/// which must belong to staging.device()). Returns once every byte is written (`stream` is synchronized), so the
/// source may be freed and the staging reused right after. Throws Error(Resource) "nvfp4 scale swizzle: staging
/// budget <B> bytes is too small: one expert's gathered scales [M, K16] need <N> bytes per half, a budget of at
/// least <2N> bytes" when a half cannot hold one expert; Error(Mismatch) for negative dims or a null pointer with
/// bytes to move; Error(Io) naming the step on a CUDA failure.
void nvfp4_scale_swizzle_device(const uint8_t* gathered_host, int64_t experts, int64_t m, int64_t k16,
                                uint8_t* runtime_device, DeviceStaging& staging, cudaStream_t stream);

/// The swizzle kernel alone, from scales already on the device (`gathered_device` [E, M, K16]) into
/// `runtime_device` [E, Mp, Kp]; enqueued on `stream` of the current device, no synchronization (benchmarks, and
/// callers that stage themselves). Errors as above, minus the budget.
void nvfp4_scale_swizzle_launch(const uint8_t* gathered_device, int64_t experts, int64_t m, int64_t k16,
                                uint8_t* runtime_device, cudaStream_t stream);

}  // namespace wsb
