// CUDA build of engine/cuda/delta_ops.hpp.
#include <string>

#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/delta_ops.hpp"
#include "core/digest64_terms.hpp"

namespace wsb::cuda_ops {
namespace {

constexpr int kThreads = 256;

int grid_for(uint64_t items) {
  const uint64_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 8192 ? (blocks == 0 ? 1 : blocks) : 8192);  // grid-stride beyond
}

/// Integer sums are exact and order-free, so the atomics below give the same value on any grid.
__global__ void digest_kernel(const uint8_t* p, uint64_t bytes, unsigned long long* slot) {
  const uint64_t words = (bytes + 7) / 8;
  const uint64_t whole = bytes / 8;
  uint64_t sum = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t word = 0;
    if (i < whole) {
      word = reinterpret_cast<const uint64_t*>(p)[i];
    } else {
      for (uint64_t b = 8 * i; b < bytes; ++b) word |= static_cast<uint64_t>(p[b]) << (8 * (b - 8 * i));
    }
    sum += digest64_term(word, i);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if ((threadIdx.x & 31) == 0 && sum != 0) atomicAdd(slot, static_cast<unsigned long long>(sum));
}

/// One block per segment (grid-stride over segments): a segment holds at most kSegmentEntries entries, so no
/// block has much more work than another, and no thread searches for its segment.
__global__ void apply_kernel(const uint8_t* pack, uint64_t segments, uint64_t slots) {
  const uint64_t* entries = reinterpret_cast<const uint64_t*>(pack + 16);
  const uint64_t* table = entries + slots;  // 4 u64 per segment
  for (uint64_t s = blockIdx.x; s < segments; s += gridDim.x) {
    const uint64_t first = table[4 * s + 1], count = table[4 * s + 2], bytes = table[4 * s + 3];
    if (first > slots || count > slots - first) continue;
    auto* base = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(table[4 * s]));
    for (uint64_t e = threadIdx.x; e < count; e += blockDim.x) {
      const uint64_t entry = entries[first + e];
      const auto word = static_cast<uint32_t>(entry);
      if (4ull * word + 4 > bytes) continue;
      base[word] = static_cast<uint32_t>(entry >> 32);
    }
  }
}

}  // namespace

uint64_t digest64_sum_device(int device, const void* p, uint64_t bytes, uint64_t* slot, void* stream,
                             const char* what) {
  const std::string where(what);
  DeviceGuard guard(device, where);
  auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemsetAsync(slot, 0, 8, s), where + ": reset digest slot");
  if (bytes > 0) {
    digest_kernel<<<grid_for((bytes + 7) / 8), kThreads, 0, s>>>(static_cast<const uint8_t*>(p), bytes,
                                                                 reinterpret_cast<unsigned long long*>(slot));
    check(cudaGetLastError(), where + ": digest kernel launch");
  }
  uint64_t sum = 0;
  check(cudaMemcpyAsync(&sum, slot, 8, cudaMemcpyDeviceToHost, s), where + ": digest read back");
  check(cudaStreamSynchronize(s), where + ": digest");
  return sum;
}

void apply_pack_async(int device, const void* pack, uint64_t segments, uint64_t slots, void* stream,
                      const char* what) {
  if (segments == 0) return;
  const std::string where(what);
  DeviceGuard guard(device, where);
  const unsigned blocks = static_cast<unsigned>(segments < (1u << 20) ? segments : (1u << 20));
  apply_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint8_t*>(pack),
                                                                            segments, slots);
  check(cudaGetLastError(), where + ": apply kernel launch");
}

void load_delta_kernels(int device, const char* what) {
  const std::string where(what);
  DeviceGuard guard(device, where);
  cudaFuncAttributes attributes;
  check(cudaFuncGetAttributes(&attributes, apply_kernel), where + ": load the apply kernel");
  check(cudaFuncGetAttributes(&attributes, digest_kernel), where + ": load the digest kernel");
}

}  // namespace wsb::cuda_ops
