#include "harness/context.hpp"

#include "wsbench_build_commit.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/device_info.hpp"

namespace wsb {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Value of "Key:" in a /proc file, as the number it starts with (kB lines converted to bytes).
uint64_t proc_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      uint64_t value = 0;
      std::string unit;
      fields >> value >> unit;
      return unit == "kB" ? value * 1024 : value;
    }
  }
  return 0;
}

}  // namespace

std::string detect_host_runtime() {
  const std::string version = read_file("/proc/version");
  if (version.find("Linux version 4.4.0") != std::string::npos) return "gvisor";
  utsname u{};
  ::uname(&u);
  const std::string release = u.release;
  const std::string cgroup = read_file("/proc/1/cgroup");
  const bool container = std::ifstream("/.dockerenv").good() || std::ifstream("/run/.containerenv").good() ||
                         cgroup.find("docker") != std::string::npos || cgroup.find("kubepods") != std::string::npos ||
                         cgroup.find("containerd") != std::string::npos;
  // Layers from the outside in, e.g. "firecracker-vm/container".
  std::string machine = "bare-metal";
  if (release.find("-fc-") != std::string::npos) {
    machine = "firecracker-vm";
  } else if (read_file("/proc/cpuinfo").find(" hypervisor") != std::string::npos) {
    machine = "vm";
  }
  return container ? machine + "/container" : machine;
}

Context collect_context() {
  Context c;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  c.host = host;
  const std::string cpuinfo = read_file("/proc/cpuinfo");
  if (auto pos = cpuinfo.find("model name"); pos != std::string::npos) {
    auto colon = cpuinfo.find(':', pos);
    c.cpu_model = cpuinfo.substr(colon + 2, cpuinfo.find('\n', colon) - colon - 2);
  }
  c.cpu_cores = std::thread::hardware_concurrency();
  c.memory_bytes = proc_value(read_file("/proc/meminfo"), "MemTotal");
  utsname u{};
  ::uname(&u);
  c.kernel = std::string(u.sysname) + " " + u.release;
  c.os = "unknown";
  std::istringstream rel(read_file("/etc/os-release"));
  for (std::string line; std::getline(rel, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      c.os = line.substr(12);
      if (c.os.size() >= 2 && c.os.front() == '"') c.os = c.os.substr(1, c.os.size() - 2);
    }
  }
  c.runtime_detected = detect_host_runtime();
  // The commit the binary was built from (cmake/build_commit.cmake, refreshed at every build): the directory a run
  // starts in may be another checkout, or a copied tree whose git state says nothing about this binary.
  c.build_commit = WSBENCH_BUILD_COMMIT;
#ifdef NDEBUG
  c.build_type = "release";
#else
  c.build_type = "debug";
#endif
#ifdef WSBENCH_HAVE_CUDA
  c.extra["cuda_compiled"] = true;
#else
  c.extra["cuda_compiled"] = false;
#endif
  for (const auto& d : cuda_devices()) {
    c.gpus.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memory_bytes},
                      {"compute_capability", std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
                      {"pci_bus_id", d.pci_bus_id}});
  }
  c.extra["cuda_driver"] = cuda_driver_version();
  c.extra["cuda_runtime"] = cuda_runtime_version();
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  c.date_utc = date;
  return c;
}

nlohmann::json memory_snapshot() {
  const std::string status = read_file("/proc/self/status");
  const std::string meminfo = read_file("/proc/meminfo");
  nlohmann::json out{{"rss_bytes", proc_value(status, "VmRSS")},
                     {"rss_peak_bytes", proc_value(status, "VmHWM")},
                     {"mem_available_bytes", proc_value(meminfo, "MemAvailable")},
                     {"cached_bytes", proc_value(meminfo, "Cached")}};
  const int devices = cuda_ops::visible_devices();
  if (devices > 0) {
    nlohmann::json used = nlohmann::json::array();
    for (int d = 0; d < devices; ++d) {
      uint64_t free_bytes = 0, total_bytes = 0;
      try {
        cuda_ops::memory_info(d, &free_bytes, &total_bytes);
      } catch (const std::exception&) {
        free_bytes = total_bytes = 0;  // a device that cannot answer reports 0 used
      }
      used.push_back(total_bytes - free_bytes);
    }
    out["device_used_bytes"] = used;  // per device, every process's allocations (cudaMemGetInfo)
  }
  return out;
}

void reset_peak_rss() {
  // Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS. Where refused, the peak stays the
  // process's lifetime peak, which is still an upper bound.
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace wsb
