// CuptiTracer sessions and the summary arithmetic (engine/cuda/cupti_tracer.hpp); the CUPTI calls themselves are in
// cupti_activity.cpp. Compiles with and without CUDA.
#include "engine/cuda/cupti_tracer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/cupti_activity.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

/// CUPTI allows one subscriber per process, so one tracer session at a time.
std::atomic<bool> g_session_active{false};

}  // namespace

double union_seconds(std::vector<CuptiInterval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const CuptiInterval& a, const CuptiInterval& b) { return a.start_ns < b.start_ns; });
  uint64_t total = 0;
  bool open = false;
  uint64_t cur_start = 0, cur_end = 0;
  for (const auto& iv : intervals) {
    if (iv.end_ns <= iv.start_ns) continue;
    if (open && iv.start_ns <= cur_end) {
      cur_end = std::max(cur_end, iv.end_ns);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = iv.start_ns;
    cur_end = iv.end_ns;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return static_cast<double>(total) / 1e9;
}

CuptiSummary summarize_cupti(const CuptiRecords& records) {
  CuptiSummary s;
  s.enabled = true;
  s.h2d_bytes = records.h2d_bytes;
  s.memcpy_records = records.memcpy_records;
  s.h2d_records = records.h2d_records;
  s.copy_busy_seconds = union_seconds(records.h2d);
  if (!records.h2d.empty()) {
    uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
    for (const auto& iv : records.h2d) {
      first = std::min(first, iv.start_ns);
      last = std::max(last, iv.end_ns);
    }
    s.first_to_last_seconds = static_cast<double>(last - first) / 1e9;
  }
  s.achieved_gbps = s.copy_busy_seconds > 0 ? static_cast<double>(s.h2d_bytes) / s.copy_busy_seconds / 1e9 : 0.0;
  s.kernel_records = records.kernels.size();
  s.kernel_busy_seconds = union_seconds(records.kernels);
  s.dropped_records = records.dropped_records;
  std::vector<std::string> notes;
  if (records.incomplete_records > 0) {
    notes.push_back(fmt::format("{} records without timestamps (work unfinished at stop; their bytes are counted)",
                                records.incomplete_records));
  }
  if (records.dropped_records > 0) notes.push_back(fmt::format("{} records dropped by CUPTI", records.dropped_records));
  s.note = fmt::format("{}", fmt::join(notes, "; "));
  return s;
}

nlohmann::json cupti_json(const CuptiSummary& s) {
  return {{"enabled", s.enabled},
          {"note", s.note},
          {"h2d_bytes", s.h2d_bytes},
          {"memcpy_records", s.memcpy_records},
          {"h2d_records", s.h2d_records},
          {"copy_busy_seconds", s.copy_busy_seconds},
          {"first_to_last_seconds", s.first_to_last_seconds},
          {"achieved_gbps", s.achieved_gbps},
          {"kernel_records", s.kernel_records},
          {"kernel_busy_seconds", s.kernel_busy_seconds},
          {"dropped_records", s.dropped_records}};
}

std::string CuptiTracer::unavailable_reason() {
  const char* env = std::getenv("WSBENCH_CUPTI");
  if (env != nullptr && std::string(env) == "0") return "disabled by WSBENCH_CUPTI=0";
  if (!cuda_ops::built()) return "built without CUDA";
  if (cuda_ops::visible_devices() == 0) return "no CUDA device";
  return cupti_activity::load_error();
}

CuptiTracer::~CuptiTracer() {
  if (!active_) return;
  if (collecting_) {
    try {
      cupti_activity::end();
    } catch (...) {  // a destructor never throws; the records are discarded anyway
    }
  }
  g_session_active.store(false);
}

void CuptiTracer::start() {
  bool expected = false;
  if (!g_session_active.compare_exchange_strong(expected, true)) {
    throw Error(ErrorKind::State, "CUPTI tracer: another tracer is already active in this process (CUPTI allows "
                                  "one subscriber)");
  }
  reason_ = unavailable_reason();
  collecting_ = false;
  if (reason_.empty()) {
    try {
      cupti_activity::begin();
    } catch (...) {
      g_session_active.store(false);
      throw;
    }
    collecting_ = true;
  }
  active_ = true;
}

CuptiSummary CuptiTracer::stop() {
  if (!active_) throw Error(ErrorKind::State, "CUPTI tracer: stop() without start()");
  active_ = false;
  CuptiSummary summary;
  if (collecting_) {
    collecting_ = false;
    try {
      summary = summarize_cupti(cupti_activity::end());
    } catch (...) {
      g_session_active.store(false);
      throw;
    }
  } else {
    summary.enabled = false;
    summary.note = reason_;
  }
  g_session_active.store(false);
  return summary;
}

}  // namespace wsb
