// CUDA build of measure_h2d_floors (engine/cuda/h2d_floor.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/h2d_floor.hpp"

namespace wsb {
namespace {

using cuda_ops::check;

/// Everything one device's measurement owns; released in the destructor (errors dropped, it may run while unwinding).
struct DeviceRig {
  int device = 0;
  void* host = nullptr;
  void* dev = nullptr;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> joins;  ///< one per stream > 0: stream 0 waits for it before the stop event
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;

  ~DeviceRig() {
    for (cudaStream_t s : streams) cudaStreamSynchronize(s);
    for (cudaEvent_t e : joins) cudaEventDestroy(e);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    if (dev != nullptr) cudaFree(dev);
    if (host != nullptr) cudaFreeHost(host);
    cudaGetLastError();
  }
};

std::string on(int device, const std::string& call) { return "H2D floor on device " + std::to_string(device) + ": " + call; }

void allocate(DeviceRig& rig, uint64_t bytes, int streams) {
  const int d = rig.device;
  cudaError_t status = cudaHostAlloc(&rig.host, bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    rig.host = nullptr;
    cudaGetLastError();
    throw Error(ErrorKind::Resource, on(d, "cudaHostAlloc of " + std::to_string(bytes) +
                                               " bytes of pinned host memory failed: " + cudaGetErrorString(status)));
  }
  // Touch every page with a non-zero pattern: the copies then read real, resident data.
  std::fill_n(static_cast<unsigned char*>(rig.host), bytes, static_cast<unsigned char>(0x5A));
  status = cudaMalloc(&rig.dev, bytes);
  if (status != cudaSuccess) {
    rig.dev = nullptr;
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    throw Error(ErrorKind::Resource, on(d, "cudaMalloc of " + std::to_string(bytes) + " bytes failed: " +
                                               cudaGetErrorString(status) + " (" + std::to_string(free_b) +
                                               " bytes free)"));
  }
  for (int i = 0; i < streams; ++i) {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), on(d, "cudaStreamCreateWithFlags"));
    rig.streams.push_back(s);
    if (i > 0) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), on(d, "cudaEventCreate"));
      rig.joins.push_back(e);
    }
  }
  check(cudaEventCreate(&rig.start), on(d, "cudaEventCreate"));
  check(cudaEventCreate(&rig.stop), on(d, "cudaEventCreate"));
}

/// One timed pass of `bytes` in `chunk`-byte pieces; returns seconds.
double timed_pass(DeviceRig& rig, uint64_t bytes, uint64_t chunk) {
  const int d = rig.device;
  const size_t n_streams = rig.streams.size();
  check(cudaEventRecord(rig.start, rig.streams[0]), on(d, "cudaEventRecord(start)"));
  for (size_t s = 1; s < n_streams; ++s) {
    check(cudaStreamWaitEvent(rig.streams[s], rig.start, 0), on(d, "cudaStreamWaitEvent(start)"));
  }
  auto* dst = static_cast<unsigned char*>(rig.dev);
  const auto* src = static_cast<const unsigned char*>(rig.host);
  uint64_t piece = 0;
  for (uint64_t done = 0; done < bytes; done += chunk, ++piece) {
    const uint64_t n = std::min(chunk, bytes - done);
    check(cudaMemcpyAsync(dst + done, src + done, n, cudaMemcpyHostToDevice, rig.streams[piece % n_streams]),
          on(d, "cudaMemcpyAsync H2D"));
  }
  for (size_t s = 1; s < n_streams; ++s) {
    check(cudaEventRecord(rig.joins[s - 1], rig.streams[s]), on(d, "cudaEventRecord(join)"));
    check(cudaStreamWaitEvent(rig.streams[0], rig.joins[s - 1], 0), on(d, "cudaStreamWaitEvent(join)"));
  }
  check(cudaEventRecord(rig.stop, rig.streams[0]), on(d, "cudaEventRecord(stop)"));
  check(cudaEventSynchronize(rig.stop), on(d, "cudaEventSynchronize(stop)"));
  float ms = 0;
  check(cudaEventElapsedTime(&ms, rig.start, rig.stop), on(d, "cudaEventElapsedTime"));
  return static_cast<double>(ms) / 1e3;
}

}  // namespace

std::vector<H2dFloor> measure_h2d_floors(const std::vector<uint64_t>& chunk_sizes, uint64_t total_bytes, int streams,
                                         int repeats) {
  const bool zero_chunk = std::find(chunk_sizes.begin(), chunk_sizes.end(), uint64_t{0}) != chunk_sizes.end();
  if (total_bytes == 0 || streams < 1 || repeats < 1 || zero_chunk) {
    throw Error(ErrorKind::Mismatch, "measure_h2d_floors: total_bytes (" + std::to_string(total_bytes) +
                                         "), streams (" + std::to_string(streams) + "), repeats (" +
                                         std::to_string(repeats) + ") and every chunk size must be > 0");
  }
  std::vector<H2dFloor> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  int previous = 0;
  check(cudaGetDevice(&previous), "H2D floor: cudaGetDevice");
  try {
    for (int d = 0; d < count; ++d) {
      check(cudaSetDevice(d), on(d, "cudaSetDevice"));
      DeviceRig rig;
      rig.device = d;
      allocate(rig, total_bytes, streams);
      for (uint64_t requested : chunk_sizes) {
        const uint64_t chunk = std::min(requested, total_bytes);
        timed_pass(rig, total_bytes, chunk);  // warm-up: first-touch mappings, copy-engine clocks
        double best = 0;
        for (int rep = 0; rep < repeats; ++rep) {
          const double seconds = timed_pass(rig, total_bytes, chunk);
          if (seconds > 0) best = std::max(best, static_cast<double>(total_bytes) / seconds / 1e9);
        }
        out.push_back(H2dFloor{d, chunk, streams, total_bytes, best});
      }
    }
  } catch (...) {
    cudaSetDevice(previous);
    throw;
  }
  cudaSetDevice(previous);
  return out;
}

}  // namespace wsb
