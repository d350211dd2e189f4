#pragma once
// Physical floors measured in the same run as the times they judge: host memcpy GB/s (with the prepare thread
// count), sequential write (fsynced) and read GB/s of the filesystem holding the store and the mode's checkpoint,
// and pinned H2D GB/s per GPU. GB/s = 1e9 B/s.
#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cuda/h2d_floor.hpp"
#include "reports/results.hpp"

namespace wsb {

struct FloorMeasurement {
  double host_memcpy_gbps = 0;
  int host_memcpy_threads = 1;
  uint64_t host_memcpy_bytes = 0;
  double disk_read_gbps = 0;
  uint64_t disk_read_bytes = 0;
  double disk_write_gbps = 0;  ///< the same file written with 4 MiB writes and fsynced, before it is read
  /// One read plus one write of the same bytes: 1 / (1 / read + 1 / write) GB/s, the floor of a phase that reads
  /// its bytes from the disk and writes them back (disk mode's prepare, Floor::DiskReadWrite). 0 when unmeasured.
  double disk_read_write_gbps() const;
  std::string disk_path;
  bool disk_read_cold = false;  ///< page cache dropped for the file before reading (posix_fadvise)
  /// Pinned H2D per (device, chunk size) (engine/cuda/h2d_floor.hpp); empty without a CUDA device.
  std::vector<H2dFloor> h2d;
  /// The H2D floor of a commit: the sum over the devices the TP ranks use of each device's best chunk size (ranks
  /// on distinct devices copy over their own links in parallel; ranks sharing a device share its link). 0 if none.
  double h2d_gbps = 0;
  std::vector<int> h2d_devices;  ///< devices summed into h2d_gbps
};

/// Best of `repeats` copies of `bytes` split over `threads` threads.
double measure_host_memcpy_gbps(uint64_t bytes, int threads, int repeats = 3);
/// Sequential disk rates of one file, GB/s.
struct DiskFloor {
  double write_gbps = 0;  ///< 4 MiB writes then fsync, timed together (what a durable write costs)
  double read_gbps = 0;   ///< 4 MiB reads after the page cache dropped the file
  bool cold = false;      ///< the page-cache drop is believed effective
};
/// Writes a `bytes` file under `dir` (4 MiB writes, fsync), drops it from the page cache, reads it back with 4 MiB
/// reads, removes it. Throws Error(Io) naming the file.
DiskFloor measure_disk_floor(const std::filesystem::path& dir, uint64_t bytes);
/// measure_disk_floor's read rate; sets `cold` as it does.
double measure_disk_read_gbps(const std::filesystem::path& dir, uint64_t bytes, bool* cold);
FloorMeasurement measure_floors(const std::filesystem::path& dir, uint64_t bytes, int threads);
/// Measures the pinned H2D floors of every visible device (chunks 16..1024 MiB, 1 GiB per pass, `streams` copy
/// streams, as a commit copies) into `floors`, and sets h2d_gbps for `tp` ranks placed as the engine places them
/// (rank r on device r % devices). Throws Error(Resource) without a CUDA device: a CUDA cell needs its floor.
void add_h2d_floors(FloorMeasurement& floors, int tp, int streams);
/// The floors as results record them: the typed GB/s fields, and threads, bytes, disk path, cold read, the disk
/// write and read-plus-write rates ("disk_write_gbps", "disk_read_write_gbps": the floors of the phases named so) and
/// the per-device H2D measurements in `extra`.
Floors floors_record(const FloorMeasurement& floors);

}  // namespace wsb
