#pragma once
// Memory sampling during prepare and commit: a thread that reads this process's RSS (/proc/self/statm), its
// cgroup's memory use (v2 memory.current / memory.peak; v1 memory.usage_in_bytes / memory.max_usage_in_bytes),
// MemAvailable and Cached (/proc/meminfo) and, when asked, device memory used per GPU (cudaMemGetInfo) every
// `period`, keeping only peaks. Files stay open and are re-read with pread, so a sample costs a few syscalls.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// What one sampling window saw. Peaks are maxima over samples; mem_available_min is the minimum.
struct MemoryPeaks {
  size_t samples = 0;
  double seconds = 0;  ///< start() -> stop()
  uint64_t rss_peak_bytes = 0;
  std::optional<uint64_t> cgroup_current_peak_bytes;  ///< max sampled memory.current (v1: usage_in_bytes)
  std::optional<uint64_t> cgroup_memory_peak_bytes;   ///< memory.peak (v1: max_usage_in_bytes) read at stop: the
                                                      ///< cgroup's own high-water mark, which may predate start()
  std::optional<uint64_t> mem_available_min_bytes;
  std::optional<uint64_t> cached_peak_bytes;
  std::vector<uint64_t> device_used_peak_bytes;       ///< per visible GPU; empty when devices were not sampled
};

/// {"samples", "seconds", "period_ms", "rss_peak_bytes", and each optional field present, named as in MemoryPeaks}.
nlohmann::json memory_peaks_json(const MemoryPeaks& peaks, std::chrono::milliseconds period);

/// Resident bytes from /proc/self/statm text (second field, in pages of `page_size` bytes); nullopt if malformed.
std::optional<uint64_t> statm_rss_bytes(std::string_view statm, uint64_t page_size);

/// The value of `key` in /proc/meminfo text ("MemAvailable:  123 kB" -> 123 * 1024); nullopt when absent.
std::optional<uint64_t> meminfo_bytes(std::string_view meminfo, std::string_view key);

/// The memory-controller directory of this process's cgroup from /proc/self/cgroup text: v2 ("0::/path") ->
/// cgroup_root/path, v1 ("N:...memory...:/path") -> cgroup_root/memory/path. Empty when neither line exists.
/// `v1` is set accordingly.
std::string cgroup_memory_dir(std::string_view proc_self_cgroup, std::string_view cgroup_root, bool* v1);

/// Samples in a background thread between start() and stop(). Not copyable; one window at a time.
class MemorySampler {
 public:
  /// `devices`: also sample cudaMemGetInfo on every visible GPU (only pass true when the process already uses a
  /// device: the first call on a GPU creates its context).
  explicit MemorySampler(std::chrono::milliseconds period = std::chrono::milliseconds(5), bool devices = false);
  ~MemorySampler();
  MemorySampler(const MemorySampler&) = delete;
  MemorySampler& operator=(const MemorySampler&) = delete;

  /// Takes one sample now and starts the thread. Throws std::logic_error when already running.
  void start();
  /// Takes a last sample, joins the thread and returns the window's peaks. Returns the last peaks when not running.
  MemoryPeaks stop();
  /// Samples taken so far in this window (thread-safe).
  size_t samples() const;
  std::chrono::milliseconds period() const { return period_; }

 private:
  void sample();
  static std::optional<uint64_t> read_number(int fd);

  std::chrono::milliseconds period_;
  int devices_ = 0;
  int statm_fd_ = -1, meminfo_fd_ = -1, cg_current_fd_ = -1, cg_peak_fd_ = -1;
  uint64_t page_size_ = 4096;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  std::thread thread_;
  std::chrono::steady_clock::time_point start_;
  MemoryPeaks peaks_;
};

}  // namespace wsb
