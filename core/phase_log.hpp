#pragma once
// Timed phases of one prepare / commit / load, each with a byte count and the physical floor it is judged
// against. Every arrow of docs/design.md's data flow is one phase.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/nvtx.hpp"

namespace wsb {

/// Which measured physical limit a phase is compared with (reports: time / (bytes / floor GB/s)). DiskReadWrite: the
/// phase reads its bytes from disk and writes as many back (disk mode's prepare), so its floor time is
/// bytes / disk read GB/s + bytes / disk write GB/s.
enum class Floor { None, HostMemcpy, DiskRead, H2D, DiskReadWrite };
const char* floor_name(Floor floor);

/// One finished phase. Seconds of wall time; bytes moved (0 when not meaningful).
struct PhaseRecord {
  std::string name;  ///< dotted, e.g. "prepare.apply", "commit.copy"
  double seconds = 0;
  uint64_t bytes = 0;
  Floor floor = Floor::None;
};

/// Thread-safe list of phases; a phase that repeats (e.g. per rank) is recorded each time.
class PhaseLog {
 public:
  void add(PhaseRecord record);
  std::vector<PhaseRecord> records() const;
  /// Sum of seconds / bytes over records named `name`.
  double seconds(const std::string& name) const;
  uint64_t bytes(const std::string& name) const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<PhaseRecord> records_;
};

/// Times a scope into a PhaseLog and marks it as an NVTX range of the same name (Nsight Systems). Set `bytes` before
/// the scope ends.
class ScopedPhase {
 public:
  ScopedPhase(PhaseLog& log, std::string name, Floor floor = Floor::None, uint64_t bytes = 0);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;
  void set_bytes(uint64_t bytes) { bytes_ = bytes; }
  void add_bytes(uint64_t bytes) { bytes_ += bytes; }

 private:
  PhaseLog& log_;
  std::string name_;
  Floor floor_;
  uint64_t bytes_;
  std::chrono::steady_clock::time_point start_;
  NvtxRange range_;
};

/// Seconds since an arbitrary process-wide steady epoch (for timestamps compared within one process).
double steady_seconds();
/// A steady_seconds() time of this process as CLOCK_MONOTONIC seconds (std::chrono::steady_clock's epoch, shared by
/// every process of the host): the form step times travel in between `wsbench serve` and its client.
double monotonic_from_steady(double steady);
/// The reverse of monotonic_from_steady: a CLOCK_MONOTONIC time of this host as this process's steady_seconds().
double steady_from_monotonic(double monotonic);

}  // namespace wsb
