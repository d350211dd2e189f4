// CUDA build of engine/quant/nvfp4_swizzle_device.hpp: the swizzle kernel and the double-buffered staging loop.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/quant/cuda_check.cuh"
#include "engine/quant/device_staging_impl.cuh"
#include "engine/quant/nvfp4_swizzle_device.hpp"
#include "engine/quant/nvfp4_swizzle_math.hpp"

namespace wsb {

namespace quant {
namespace {

constexpr int kSwizzleThreads = 256;
constexpr int64_t kSwizzleMaxBlocks = 1 << 20;  // grid-stride beyond this

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// One thread per runtime byte (grid-stride): every byte of [experts, mp, kp] at `out` is written, padding zero.
__global__ void __launch_bounds__(kSwizzleThreads) nvfp4_swizzle_kernel(const uint8_t* gathered, int64_t experts,
                                                                         int64_t m, int64_t k16, int64_t mp,
                                                                         int64_t kp, uint8_t* out) {
  const int64_t total = experts * mp * kp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t source = nvfp4_swizzle_source(mp, kp, m, k16, o);
    out[o] = source < 0 ? uint8_t{0} : gathered[source];
  }
}

void enqueue_swizzle(const uint8_t* gathered, int64_t experts, int64_t m, int64_t k16, uint8_t* out,
                     cudaStream_t stream, const std::string& what) {
  const int64_t mp = round_up(m, 128), kp = round_up(k16, 4), total = experts * mp * kp;
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + kSwizzleThreads - 1) / kSwizzleThreads, kSwizzleMaxBlocks);
  nvfp4_swizzle_kernel<<<static_cast<unsigned>(blocks), kSwizzleThreads, 0, stream>>>(gathered, experts, m, k16, mp,
                                                                                      kp, out);
  check_cuda(cudaGetLastError(), what + ": swizzle kernel");
}

std::string shape_text(int64_t e, int64_t m, int64_t k16) {
  return "[" + std::to_string(e) + ", " + std::to_string(m) + ", " + std::to_string(k16) + "]";
}

void check_dims(int64_t e, int64_t m, int64_t k16, const void* src, const void* dst, const std::string& what) {
  if (e < 0 || m < 0 || k16 < 0)
    throw Error(ErrorKind::Mismatch, what + ": negative dims in gathered " + shape_text(e, m, k16));
  if (e * m * k16 > 0 && (src == nullptr || dst == nullptr))
    throw Error(ErrorKind::Mismatch, what + ": null source or runtime pointer for gathered " + shape_text(e, m, k16));
}

bool is_pinned(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // older runtimes report pageable memory as an error
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

/// Waits for both streams after a failure so no copy still reads the caller's source or the bounce buffer.
void drain(DeviceStaging::Impl& s, cudaStream_t stream) {
  cudaStreamSynchronize(s.copy_stream);
  cudaStreamSynchronize(stream);
  cudaGetLastError();
}

}  // namespace
}  // namespace quant

void nvfp4_scale_swizzle_launch(const uint8_t* gathered_device, int64_t experts, int64_t m, int64_t k16,
                                uint8_t* runtime_device, cudaStream_t stream) {
  const std::string what = "nvfp4 scale swizzle (device, " + quant::shape_text(experts, m, k16) + ")";
  quant::check_dims(experts, m, k16, gathered_device, runtime_device, what);
  quant::enqueue_swizzle(gathered_device, experts, m, k16, runtime_device, stream, what);
}

void nvfp4_scale_swizzle_device(const uint8_t* gathered_host, int64_t experts, int64_t m, int64_t k16,
                                uint8_t* runtime_device, DeviceStaging& staging, cudaStream_t stream) {
  using quant::check_cuda;
  const std::string what = "nvfp4 scale swizzle (staged, gathered " + quant::shape_text(experts, m, k16) + ")";
  quant::check_dims(experts, m, k16, gathered_host, runtime_device, what);
  const uint64_t per_expert = nvfp4_swizzle_expert_bytes(m, k16);
  // M == 0 or K16 == 0 gives Mp == 0 or Kp == 0: the runtime tensor has no bytes either.
  if (experts == 0 || per_expert == 0) return;
  DeviceStaging::Impl& s = staging.impl();
  if (per_expert > s.half)
    throw Error(ErrorKind::Resource,
                "nvfp4 scale swizzle: staging budget " + std::to_string(s.budget) + " bytes is too small: one " +
                    "expert's gathered scales [" + std::to_string(m) + ", " + std::to_string(k16) + "] need " +
                    std::to_string(per_expert) + " bytes per half, a budget of at least " +
                    std::to_string(2 * per_expert) + " bytes");
  const int64_t chunk = std::min<int64_t>(experts, static_cast<int64_t>(s.half / per_expert));
  const int64_t out_per_expert = quant::round_up(m, 128) * quant::round_up(k16, 4);
  quant::DeviceGuard guard(s.device, what);
  const bool pinned = quant::is_pinned(gathered_host);
  uint8_t* bounce = pinned ? nullptr : quant::staging_bounce(s);
  try {
    int64_t i = 0;
    for (int64_t e0 = 0; e0 < experts; e0 += chunk, ++i) {
      const int h = static_cast<int>(i % 2);
      const int64_t count = std::min(chunk, experts - e0);
      const uint64_t bytes = static_cast<uint64_t>(count) * per_expert;
      const uint8_t* src = gathered_host + static_cast<uint64_t>(e0) * per_expert;
      uint8_t* half = s.buffer + static_cast<uint64_t>(h) * s.half;
      const std::string step = what + ", chunk " + std::to_string(i) + " (experts " + std::to_string(e0) + ".." +
                               std::to_string(e0 + count - 1) + ")";
      // Device half h was last read by the kernel of chunk i - 2; its bounce half by the copy of chunk i - 2.
      if (i >= 2) check_cuda(cudaStreamWaitEvent(s.copy_stream, s.consumed[h], 0), step + ": wait for half");
      if (!pinned) {
        if (i >= 2) check_cuda(cudaEventSynchronize(s.copied[h]), step + ": wait for bounce half");
        uint8_t* bounce_half = bounce + static_cast<uint64_t>(h) * s.half;
        std::memcpy(bounce_half, src, bytes);
        src = bounce_half;
      }
      check_cuda(cudaMemcpyAsync(half, src, bytes, cudaMemcpyHostToDevice, s.copy_stream), step + ": H2D");
      check_cuda(cudaEventRecord(s.copied[h], s.copy_stream), step + ": record copy");
      check_cuda(cudaStreamWaitEvent(stream, s.copied[h], 0), step + ": wait for copy");
      quant::enqueue_swizzle(half, count, m, k16, runtime_device + static_cast<uint64_t>(e0 * out_per_expert), stream,
                             step);
      check_cuda(cudaEventRecord(s.consumed[h], stream), step + ": record kernel");
    }
    check_cuda(cudaStreamSynchronize(stream), what + ": synchronize");
  } catch (...) {
    quant::drain(s, stream);
    throw;
  }
}

}  // namespace wsb
