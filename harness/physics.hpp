#pragma once
// Physical floors measured in the same run as the times they judge: host memcpy GB/s (with the prepare thread
// count) and sequential read GB/s of the filesystem holding the store. GB/s = 1e9 bytes per second.
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace wsb {

struct FloorMeasurement {
  double host_memcpy_gbps = 0;
  int host_memcpy_threads = 1;
  uint64_t host_memcpy_bytes = 0;
  double disk_read_gbps = 0;
  uint64_t disk_read_bytes = 0;
  std::string disk_path;
  bool disk_read_cold = false;  ///< page cache dropped for the file before reading (posix_fadvise)
};

/// Best of `repeats` copies of `bytes` split over `threads` threads.
double measure_host_memcpy_gbps(uint64_t bytes, int threads, int repeats = 3);
/// Writes a `bytes` file under `dir`, fsyncs, drops it from the page cache, reads it back with 4 MiB reads.
/// Returns GB/s; sets `cold` when the page-cache drop is believed effective. Throws Error(Io).
double measure_disk_read_gbps(const std::filesystem::path& dir, uint64_t bytes, bool* cold);
FloorMeasurement measure_floors(const std::filesystem::path& dir, uint64_t bytes, int threads);
nlohmann::json floors_json(const FloorMeasurement& floors);

}  // namespace wsb
