#include <fmt/format.h>

#include <iostream>

#include "cli/commands.hpp"
#include "engine/cuda/h2d_floor.hpp"
#include "harness/physics.hpp"

namespace wsb {

int cmd_physics(const std::filesystem::path& dir, uint64_t bytes, int threads) {
  const FloorMeasurement f = measure_floors(dir, bytes, threads);
  std::cout << fmt::format("# {:<15} {:>10} {:>14} {:>8}  {}\n", "floor", "GB/s", "buffer", "threads", "where");
  std::cout << fmt::format("# {:<15} {:>10} {:>14} {:>8}\n", "", "(1e9 B/s)", "(bytes)", "");
  std::cout << fmt::format("  {:<15} {:>10.2f} {:>14} {:>8}  host RAM\n", "host_memcpy", f.host_memcpy_gbps,
                           f.host_memcpy_bytes, f.host_memcpy_threads);
  std::cout << fmt::format("  {:<15} {:>10.2f} {:>14} {:>8}  {}{}\n", "disk_read", f.disk_read_gbps, f.disk_read_bytes,
                           1, f.disk_path, f.disk_read_cold ? " (page cache dropped)" : " (page cache may be warm)");
  std::cout << fmt::format("  {:<15} {:>10.2f} {:>14} {:>8}  {} (4 MiB writes, then fsync)\n", "disk_write",
                           f.disk_write_gbps, f.disk_read_bytes, 1, f.disk_path);
  std::cout << fmt::format("  {:<15} {:>10.2f} {:>14} {:>8}  one read plus one write of the bytes (disk prepare)\n",
                           "disk_read_write", f.disk_read_write_gbps(), f.disk_read_bytes, 1);
  const auto h2d = measure_h2d_floors(default_h2d_chunk_sizes(), kH2dFloorTotalBytes, kH2dFloorStreams,
                                      kH2dFloorRepeats);
  if (h2d.empty()) {
    std::cout << "  h2d             n/a (no CUDA device in this build/run)\n";
    return 0;
  }
  std::cout << fmt::format("\n# {:<6} {:>12} {:>8} {:>10} {:>14}  {}\n", "device", "chunk", "streams", "GB/s", "copied",
                           "name");
  std::cout << fmt::format("# {:<6} {:>12} {:>8} {:>10} {:>14}\n", "", "(MiB)", "", "(1e9 B/s)", "(bytes)");
  for (const auto& m : h2d) {
    std::cout << fmt::format("  {:<6} {:>12} {:>8} {:>10.2f} {:>14}  pinned h2d\n", m.device, m.chunk_bytes >> 20,
                             m.streams, m.gbps, m.bytes);
  }
  return 0;
}

}  // namespace wsb
