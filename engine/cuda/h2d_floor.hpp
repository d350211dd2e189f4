#pragma once
// The pinned host-to-device copy floor of each visible GPU: how fast a commit's H2D copies can go at best, measured
// the way a commit copies (one buffer split into chunks issued round-robin over several streams). C++17-clean
// (h2d_floor.cu includes it). GB/s = 1e9 bytes per second.
#include <cstdint>
#include <vector>

namespace wsb {

/// One measurement: `bytes` copied from pinned host memory to `device` in chunks of `chunk_bytes` over `streams`
/// streams, best of the repeats.
struct H2dFloor {
  int device = 0;
  uint64_t chunk_bytes = 0;
  int streams = 0;
  uint64_t bytes = 0;
  double gbps = 0;
};

/// Defaults of `wsbench physics` and of profiler cells: chunk sizes 16..1024 MiB.
inline constexpr uint64_t kH2dFloorTotalBytes = 1ull << 30;
inline constexpr int kH2dFloorStreams = 2;
inline constexpr int kH2dFloorRepeats = 3;
/// 16, 64, 256, 1024 MiB.
std::vector<uint64_t> default_h2d_chunk_sizes();

/// Measures every visible device, one entry per (device, chunk size) in device order then `chunk_sizes` order.
/// Per device: a pinned source (cudaHostAlloc) and a device buffer of `total_bytes`; `total_bytes` is copied in
/// pieces of min(chunk, total_bytes) bytes (the last piece may be shorter), piece i on stream i % streams; timed with
/// CUDA events (start recorded on stream 0 before the first copy, every other stream waits for it; stop recorded on
/// stream 0 after it waited for every other stream), after one untimed warm-up pass; best of `repeats`.
/// Returns an empty vector without a device or without a CUDA build. Throws Error(Mismatch) when total_bytes,
/// streams, repeats or a chunk size is 0; Error(Resource) when the buffers cannot be allocated (naming the bytes);
/// Error(Io) on any other CUDA failure (naming the device and call).
std::vector<H2dFloor> measure_h2d_floors(const std::vector<uint64_t>& chunk_sizes, uint64_t total_bytes,
                                         int streams, int repeats);

}  // namespace wsb
