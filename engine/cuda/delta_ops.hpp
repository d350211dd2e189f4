#pragma once
// Kernels of the device-staged delta commit (modes/sync/staged_delta.hpp), callable from g++-compiled C++20:
// digest64 of device memory and the in-place scatter of a staged pack. C++17, no CUDA headers; delta_ops.cu
// implements them, delta_ops_nocuda.cpp refuses with Error(Resource) "... built without CUDA".
#include <cstdint>

namespace wsb::cuda_ops {

/// Term sum of digest64 (core/digest64.hpp) over `bytes` bytes at device address `p` (8-byte aligned) on
/// `device`, reduced into the device word `slot` (8 bytes, reset here) on `stream`; waits for the stream and
/// returns the sum. Throws Error(Io) naming `what` on a CUDA failure.
uint64_t digest64_sum_device(int device, const void* p, uint64_t bytes, uint64_t* slot, void* stream,
                             const char* what);

/// Enqueues the scatter of the staged pack at device address `pack` (`segments` and `slots` as in its header,
/// modes/sync/staged_delta.hpp) on `stream`: one thread block per segment writes each entry's u32 value at its
/// storage address + 4 * word index; an entry whose word lies beyond its storage, or a segment whose slots lie
/// beyond the pack, is skipped. No launch when `segments` is 0. Throws Error(Io) naming `what`.
void apply_pack_async(int device, const void* pack, uint64_t segments, uint64_t slots, void* stream,
                      const char* what);

/// Loads the delta kernels on `device` now, so the first apply inside a pause does not pay for it: CUDA >= 12.2
/// loads kernels lazily, and the runtime loads one when it is first used or referenced (CUDA C++ Programming Guide
/// 12.2, "Lazy Loading"), which cudaFuncGetAttributes does. Throws Error(Io) naming `what`.
void load_delta_kernels(int device, const char* what);

}  // namespace wsb::cuda_ops
