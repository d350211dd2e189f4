#pragma once
// CUPTI activity tracing around a commit: memcpy and concurrent-kernel records, summarized per trial (bytes H2D,
// achieved GB/s while copying, copy time vs the pause). CUPTI is opened with dlopen at run time, so the binary has
// no link dependency on it and a machine without it still runs everything else (engine/cuda/cupti_activity.hpp).
//
// CUPTI allows one subscriber per process (a profiler such as Nsight Systems is one): set WSBENCH_CUPTI=0 to turn the
// tracer off, e.g. when running under nsys.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// What one traced interval saw. Times in seconds, bytes in bytes, GB/s = 1e9 B/s.
struct CuptiSummary {
  bool enabled = false;       ///< records were collected (false: `note` says why not)
  std::string note;           ///< why tracing was off, or what was dropped / incomplete; "" when nothing to say
  uint64_t h2d_bytes = 0;     ///< sum of bytes of host-to-device memcpy records
  uint64_t memcpy_records = 0;  ///< memcpy records of every direction
  uint64_t h2d_records = 0;     ///< the host-to-device ones among them
  double copy_busy_seconds = 0;  ///< length of the union of the H2D memcpy intervals (overlaps counted once)
  double first_to_last_seconds = 0;  ///< first H2D start to last H2D end
  double achieved_gbps = 0;          ///< h2d_bytes / copy_busy_seconds / 1e9 (0 when nothing was copied)
  uint64_t kernel_records = 0;
  double kernel_busy_seconds = 0;  ///< length of the union of the kernel intervals
  uint64_t dropped_records = 0;    ///< records CUPTI reported dropped (buffers full)
};

/// One completed activity interval, CUPTI timestamps in ns.
struct CuptiInterval {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

/// What the activity buffers held (filled by engine/cuda/cupti_activity.cpp; exposed so the summary arithmetic is
/// testable without a device).
struct CuptiRecords {
  std::vector<CuptiInterval> h2d;  ///< host-to-device memcpy intervals (complete ones only)
  uint64_t h2d_bytes = 0;
  uint64_t h2d_records = 0;  ///< every H2D memcpy record, complete or not
  uint64_t memcpy_records = 0;
  std::vector<CuptiInterval> kernels;  ///< complete kernel intervals
  uint64_t incomplete_records = 0;     ///< memcpy/kernel records without valid timestamps (bytes still counted)
  uint64_t dropped_records = 0;
};

/// Length in seconds of the union of `intervals` (ns; an interval with end <= start adds nothing).
double union_seconds(std::vector<CuptiInterval> intervals);
/// The summary of `records` (enabled = true; note mentions incomplete or dropped records).
CuptiSummary summarize_cupti(const CuptiRecords& records);
/// {"enabled", "note", "h2d_bytes", "memcpy_records", "h2d_records", "copy_busy_seconds", "first_to_last_seconds",
///  "achieved_gbps", "kernel_records", "kernel_busy_seconds", "dropped_records"}.
nlohmann::json cupti_json(const CuptiSummary& summary);

/// Collects CUPTI activity between start() and stop(). At most one tracer is active per process.
class CuptiTracer {
 public:
  CuptiTracer() = default;
  /// Disables collection if still active (never throws).
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  /// "" when tracing can run here; otherwise why not: "disabled by WSBENCH_CUPTI=0", "built without CUDA", "no CUDA
  /// device", or "libcupti not loadable (tried ...): <dlerror>".
  static std::string unavailable_reason();

  /// Enables the MEMCPY and CONCURRENT_KERNEL activity kinds. Throws Error(State) "CUPTI tracer: another tracer is
  /// already active in this process" when any tracer (this one included) is active. When unavailable_reason() is
  /// not empty, nothing is enabled and stop() returns enabled = false with that reason as its note. Throws
  /// Error(Resource) naming the CUPTI call and its error when CUPTI refuses (e.g. another subscriber such as nsys:
  /// set WSBENCH_CUPTI=0), leaving no tracer active.
  void start();
  /// Flushes every buffer, disables the kinds and summarizes what was recorded since start(). Call it after the
  /// traced work completed (e.g. after DeviceStorages::synchronize()): CUPTI only delivers records with end
  /// timestamps for finished work, the rest are counted as incomplete. Throws Error(State) when not started.
  CuptiSummary stop();
  bool active() const { return active_; }

 private:
  bool active_ = false;
  bool collecting_ = false;  ///< false when started while unavailable
  std::string reason_;
};

}  // namespace wsb
