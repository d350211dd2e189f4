#include "reports/format.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace wsb {

std::string_view metric_unit(MetricKind kind) {
  switch (kind) {
    case MetricKind::Duration: return "s";
    case MetricKind::Bandwidth: return "GB/s";
    case MetricKind::Percent: return "%";
    default: return "";
  }
}

int duration_decimals(double seconds) {
  const double a = std::fabs(seconds);
  // Decide on the rounded value so that 9.9996 prints "10.00", not "10.000".
  if (std::round(a * 1000.0) / 1000.0 >= 10.0) return 2;
  if (a == 0 || std::round(a * 1000.0) / 1000.0 >= 0.01) return 3;
  const int d = 2 - static_cast<int>(std::floor(std::log10(a)));
  return std::clamp(d, 3, 9);
}

std::string format_seconds(double seconds) { return fmt::format("{:.{}f}", seconds, duration_decimals(seconds)); }

std::string format_duration_range(double min_s, double max_s) {
  const int d = duration_decimals(std::max(std::fabs(min_s), std::fabs(max_s)));
  const std::string lo = fmt::format("{:.{}f}", min_s, d);
  const std::string hi = fmt::format("{:.{}f}", max_s, d);
  if (lo == hi) return lo + " s";
  return lo + "\u2013" + hi + " s";
}

std::string format_mean_ci(double mean_s, std::optional<double> half_width_s) {
  if (!half_width_s) return fmt::format("{} s \u00b1 {}", format_seconds(mean_s), kNotAvailable);
  const int d = duration_decimals(std::max(std::fabs(mean_s), std::fabs(*half_width_s)));
  return fmt::format("{:.{}f} \u00b1 {:.{}f} s", mean_s, d, *half_width_s, d);
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"kB", "MB", "GB", "TB", "PB", "EB"};
  if (std::fabs(bytes) < 1000.0) return fmt::format("{:.0f} B", bytes);
  double v = bytes;
  size_t u = 0;
  v /= 1000.0;
  while (std::fabs(v) >= 999.995 && u + 1 < kUnits.size()) {  // 999.996 kB would print "1000.00 kB"
    v /= 1000.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

std::string format_fixed2(double value) { return fmt::format("{:.2f}", value); }

std::string format_raw(double value) { return fmt::format("{}", value); }

std::string format_count(double value) { return fmt::format("{:.0f}", value); }

}  // namespace wsb
