#include "harness/memory_sampler.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "engine/cuda/cuda_ops.hpp"

namespace wsb {
namespace {

/// Reads a small file from offset 0 into `buf`; returns the text read ("" on error).
std::string_view pread_all(int fd, char* buf, size_t size) {
  if (fd < 0) return {};
  const ssize_t n = ::pread(fd, buf, size - 1, 0);
  if (n <= 0) return {};
  return std::string_view(buf, static_cast<size_t>(n));
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  return v;
}

std::string read_text(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

int open_ro(const std::string& path) { return path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC); }

void keep_max(std::optional<uint64_t>& slot, std::optional<uint64_t> v) {
  if (v && (!slot || *v > *slot)) slot = v;
}

}  // namespace

std::optional<uint64_t> statm_rss_bytes(std::string_view statm, uint64_t page_size) {
  const size_t space = statm.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto pages = parse_u64(statm.substr(space + 1));
  if (!pages) return std::nullopt;
  return *pages * page_size;
}

std::optional<uint64_t> meminfo_bytes(std::string_view meminfo, std::string_view key) {
  size_t pos = 0;
  while (pos < meminfo.size()) {
    size_t eol = meminfo.find('\n', pos);
    if (eol == std::string_view::npos) eol = meminfo.size();
    const std::string_view line = meminfo.substr(pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      auto v = parse_u64(line.substr(key.size() + 1));
      if (!v) return std::nullopt;
      return line.find("kB") != std::string_view::npos ? *v * 1024 : *v;
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

std::string cgroup_memory_dir(std::string_view text, std::string_view root, bool* v1) {
  std::string v2_dir, v1_dir;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) {
      v2_dir = std::string(root) + std::string(path);
    } else {
      // v1: a comma-separated controller list that names "memory".
      size_t s = 0;
      while (s <= controllers.size()) {
        size_t e = controllers.find(',', s);
        if (e == std::string_view::npos) e = controllers.size();
        if (controllers.substr(s, e - s) == "memory") v1_dir = std::string(root) + "/memory" + std::string(path);
        s = e + 1;
      }
    }
  }
  if (v1 != nullptr) *v1 = v2_dir.empty() && !v1_dir.empty();
  if (!v2_dir.empty()) return v2_dir;
  return v1_dir;
}

nlohmann::json memory_peaks_json(const MemoryPeaks& p, std::chrono::milliseconds period) {
  nlohmann::json j{{"samples", p.samples}, {"seconds", p.seconds}, {"period_ms", period.count()},
                   {"rss_peak_bytes", p.rss_peak_bytes}};
  if (p.cgroup_current_peak_bytes) j["cgroup_current_peak_bytes"] = *p.cgroup_current_peak_bytes;
  if (p.cgroup_memory_peak_bytes) j["cgroup_memory_peak_bytes"] = *p.cgroup_memory_peak_bytes;
  if (p.mem_available_min_bytes) j["mem_available_min_bytes"] = *p.mem_available_min_bytes;
  if (p.cached_peak_bytes) j["cached_peak_bytes"] = *p.cached_peak_bytes;
  if (!p.device_used_peak_bytes.empty()) j["device_used_peak_bytes"] = p.device_used_peak_bytes;
  return j;
}

MemorySampler::MemorySampler(std::chrono::milliseconds period, bool devices) : period_(period) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) page_size_ = static_cast<uint64_t>(page);
  statm_fd_ = open_ro("/proc/self/statm");
  meminfo_fd_ = open_ro("/proc/meminfo");
  bool v1 = false;
  const std::string dir = cgroup_memory_dir(read_text("/proc/self/cgroup"), "/sys/fs/cgroup", &v1);
  if (!dir.empty()) {
    cg_current_fd_ = open_ro(dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
    cg_peak_fd_ = open_ro(dir + (v1 ? "/memory.max_usage_in_bytes" : "/memory.peak"));
  }
  if (devices) devices_ = cuda_ops::visible_devices();
}

MemorySampler::~MemorySampler() {
  if (thread_.joinable()) stop();
  for (int fd : {statm_fd_, meminfo_fd_, cg_current_fd_, cg_peak_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::optional<uint64_t> MemorySampler::read_number(int fd) {
  char buf[64];
  return parse_u64(pread_all(fd, buf, sizeof buf));
}

void MemorySampler::sample() {
  char statm[256];
  char meminfo[8192];
  const auto rss = statm_rss_bytes(pread_all(statm_fd_, statm, sizeof statm), page_size_);
  const std::string_view mi = pread_all(meminfo_fd_, meminfo, sizeof meminfo);
  const auto available = meminfo_bytes(mi, "MemAvailable");
  const auto cached = meminfo_bytes(mi, "Cached");
  const auto cgroup = read_number(cg_current_fd_);
  std::vector<uint64_t> used;
  for (int d = 0; d < devices_; ++d) {
    uint64_t free_bytes = 0, total_bytes = 0;
    try {
      cuda_ops::memory_info(d, &free_bytes, &total_bytes);
    } catch (const std::exception&) {
      free_bytes = total_bytes = 0;
    }
    used.push_back(total_bytes - free_bytes);
  }
  std::lock_guard lock(mu_);
  ++peaks_.samples;
  if (rss) peaks_.rss_peak_bytes = std::max(peaks_.rss_peak_bytes, *rss);
  keep_max(peaks_.cgroup_current_peak_bytes, cgroup);
  keep_max(peaks_.cached_peak_bytes, cached);
  if (available && (!peaks_.mem_available_min_bytes || *available < *peaks_.mem_available_min_bytes)) {
    peaks_.mem_available_min_bytes = available;
  }
  if (peaks_.device_used_peak_bytes.size() < used.size()) peaks_.device_used_peak_bytes.resize(used.size(), 0);
  for (size_t d = 0; d < used.size(); ++d) {
    peaks_.device_used_peak_bytes[d] = std::max(peaks_.device_used_peak_bytes[d], used[d]);
  }
}

void MemorySampler::start() {
  {
    std::lock_guard lock(mu_);
    if (running_) throw std::logic_error("MemorySampler::start: already running");
    peaks_ = MemoryPeaks{};
    running_ = true;
    start_ = std::chrono::steady_clock::now();
  }
  sample();
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (running_) {
      if (cv_.wait_for(lock, period_, [this] { return !running_; })) break;
      lock.unlock();
      sample();
      lock.lock();
    }
  });
}

MemoryPeaks MemorySampler::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_) return peaks_;
    running_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sample();
  const auto peak = read_number(cg_peak_fd_);
  std::lock_guard lock(mu_);
  peaks_.cgroup_memory_peak_bytes = peak;
  peaks_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return peaks_;
}

size_t MemorySampler::samples() const {
  std::lock_guard lock(mu_);
  return peaks_.samples;
}

}  // namespace wsb
