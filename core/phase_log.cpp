#include "core/phase_log.hpp"

namespace wsb {

const char* floor_name(Floor floor) {
  switch (floor) {
    case Floor::None: return "";
    case Floor::HostMemcpy: return "host_memcpy";
    case Floor::DiskRead: return "disk_read";
    case Floor::H2D: return "h2d";
    case Floor::DiskReadWrite: return "disk_read_write";
  }
  return "";
}

void PhaseLog::add(PhaseRecord record) {
  std::lock_guard lock(mu_);
  records_.push_back(std::move(record));
}

std::vector<PhaseRecord> PhaseLog::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

double PhaseLog::seconds(const std::string& name) const {
  std::lock_guard lock(mu_);
  double total = 0;
  for (const auto& r : records_) {
    if (r.name == name) total += r.seconds;
  }
  return total;
}

uint64_t PhaseLog::bytes(const std::string& name) const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& r : records_) {
    if (r.name == name) total += r.bytes;
  }
  return total;
}

void PhaseLog::clear() {
  std::lock_guard lock(mu_);
  records_.clear();
}

ScopedPhase::ScopedPhase(PhaseLog& log, std::string name, Floor floor, uint64_t bytes)
    : log_(log),
      name_(std::move(name)),
      floor_(floor),
      bytes_(bytes),
      start_(std::chrono::steady_clock::now()),
      range_(name_) {}

ScopedPhase::~ScopedPhase() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  log_.add(PhaseRecord{name_, seconds, bytes_, floor_});
}

double steady_seconds() {
  static const auto epoch = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
}

namespace {
/// CLOCK_MONOTONIC seconds minus this process's steady_seconds(), whose epoch is the process's first call.
double monotonic_offset() {
  static const double offset = [] {
    const double process = steady_seconds();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() - process;
  }();
  return offset;
}
}  // namespace

double monotonic_from_steady(double steady) { return steady + monotonic_offset(); }
double steady_from_monotonic(double monotonic) { return monotonic - monotonic_offset(); }

}  // namespace wsb
