#include "harness/physics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/errors.hpp"
#include "modes/sync/host_buffer.hpp"

namespace wsb {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

double measure_host_memcpy_gbps(uint64_t bytes, int threads, int repeats) {
  threads = std::max(1, threads);
  HostBuffer src(bytes, 4096);
  HostBuffer dst(bytes, 4096);
  std::memset(src.data(), 0x5A, bytes);
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const double t0 = now();
    {
      std::vector<std::jthread> workers;
      const uint64_t chunk = align_up((bytes + threads - 1) / threads, 4096);
      for (int t = 0; t < threads; ++t) {
        const uint64_t begin = std::min<uint64_t>(bytes, t * chunk);
        const uint64_t end = std::min<uint64_t>(bytes, begin + chunk);
        workers.emplace_back([&, begin, end] { std::memcpy(dst.data() + begin, src.data() + begin, end - begin); });
      }
    }
    const double seconds = now() - t0;
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
  }
  return best;
}

DiskFloor measure_disk_floor(const std::filesystem::path& dir, uint64_t bytes) {
  std::filesystem::create_directories(dir);
  const auto path = dir / ".wsbench_disk_floor.bin";
  constexpr size_t kChunk = 4 << 20;
  HostBuffer buffer(kChunk, 4096);
  std::memset(buffer.data(), 0xA5, kChunk);
  DiskFloor floor;
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorKind::Io, fmt::format("open {}: {}", path.string(), std::strerror(errno)));
  const double w0 = now();
  uint64_t written = 0;
  for (; written < bytes; written += kChunk) {
    if (::write(fd, buffer.data(), kChunk) != static_cast<ssize_t>(kChunk)) {
      const int err = errno;
      ::close(fd);
      std::filesystem::remove(path);
      throw Error(ErrorKind::Io, fmt::format("write {}: {}", path.string(), std::strerror(err)));
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    std::filesystem::remove(path);
    throw Error(ErrorKind::Io, fmt::format("fsync {}: {}", path.string(), std::strerror(err)));
  }
  floor.write_gbps = static_cast<double>(written) / (now() - w0) / 1e9;
  floor.cold = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::Io, fmt::format("open {}: {}", path.string(), std::strerror(errno)));
  const double t0 = now();
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), kChunk);
    if (n <= 0) break;
    total += static_cast<uint64_t>(n);
  }
  const double seconds = now() - t0;
  ::close(fd);
  std::filesystem::remove(path);
  floor.read_gbps = static_cast<double>(total) / seconds / 1e9;
  return floor;
}

double measure_disk_read_gbps(const std::filesystem::path& dir, uint64_t bytes, bool* cold) {
  const DiskFloor floor = measure_disk_floor(dir, bytes);
  *cold = floor.cold;
  return floor.read_gbps;
}

double FloorMeasurement::disk_read_write_gbps() const {
  if (disk_read_gbps <= 0 || disk_write_gbps <= 0) return 0;
  return 1.0 / (1.0 / disk_read_gbps + 1.0 / disk_write_gbps);
}

FloorMeasurement measure_floors(const std::filesystem::path& dir, uint64_t bytes, int threads) {
  FloorMeasurement floors;
  floors.host_memcpy_threads = threads;
  floors.host_memcpy_bytes = bytes;
  floors.host_memcpy_gbps = measure_host_memcpy_gbps(bytes, threads);
  floors.disk_read_bytes = align_up(bytes, 4 << 20);  // written and read in whole 4 MiB chunks
  floors.disk_path = dir.string();
  const DiskFloor disk = measure_disk_floor(dir, bytes);
  floors.disk_read_gbps = disk.read_gbps;
  floors.disk_write_gbps = disk.write_gbps;
  floors.disk_read_cold = disk.cold;
  return floors;
}

void add_h2d_floors(FloorMeasurement& floors, int tp, int streams) {
  floors.h2d = measure_h2d_floors(default_h2d_chunk_sizes(), kH2dFloorTotalBytes, streams, kH2dFloorRepeats);
  if (floors.h2d.empty()) {
    throw Error(ErrorKind::Resource, "pinned H2D floor: no CUDA device visible (a CUDA cell needs one)");
  }
  std::map<int, double> best;  // device -> best GB/s over chunk sizes
  for (const auto& m : floors.h2d) best[m.device] = std::max(best[m.device], m.gbps);
  const int devices = static_cast<int>(best.size());
  std::set<int> used;
  for (int r = 0; r < tp; ++r) used.insert(r % devices);
  floors.h2d_gbps = 0;
  floors.h2d_devices.assign(used.begin(), used.end());
  for (int d : used) floors.h2d_gbps += best[d];
}

Floors floors_record(const FloorMeasurement& f) {
  Floors out;
  out.host_memcpy_gbps = f.host_memcpy_gbps;
  out.disk_read_gbps = f.disk_read_gbps;
  out.extra = {{"host_memcpy_threads", f.host_memcpy_threads}, {"host_memcpy_bytes", f.host_memcpy_bytes},
               {"disk_read_bytes", f.disk_read_bytes},         {"disk_path", f.disk_path},
               {"disk_read_cold", f.disk_read_cold}};
  if (f.disk_write_gbps > 0) {
    out.extra["disk_write_gbps"] = f.disk_write_gbps;
    out.extra["disk_read_write_gbps"] = f.disk_read_write_gbps();
  }
  if (!f.h2d.empty()) {
    out.h2d_gbps = f.h2d_gbps;
    out.extra["h2d_devices"] = f.h2d_devices;
    nlohmann::json per = nlohmann::json::array();
    for (const auto& m : f.h2d) {
      per.push_back({{"device", m.device}, {"chunk_bytes", m.chunk_bytes}, {"streams", m.streams},
                     {"bytes", m.bytes}, {"gbps", m.gbps}});
    }
    out.extra["h2d"] = per;
  }
  return out;
}

}  // namespace wsb
