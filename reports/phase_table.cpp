#include "reports/phase_table.hpp"

#include <fmt/format.h>

#include "reports/phase_stats.hpp"

namespace wsb {
namespace {

template <class T>
Value or_na(const std::optional<T>& v) {
  if (!v) return Value{};
  return static_cast<double>(*v);
}

std::string floor_text(const PhaseStat& s) {
  if (s.floor.empty()) return "";
  if (!s.floor_gbps) return s.floor + " (not measured)";
  return fmt::format("{} {} GB/s", s.floor, format_fixed2(*s.floor_gbps));
}

}  // namespace

Table phase_table(const Cell& cell) {
  Table t;
  t.columns = {{"Phase", MetricKind::Text},     {"n", MetricKind::Count},         {"min", MetricKind::Duration},
               {"median", MetricKind::Duration}, {"max", MetricKind::Duration},    {"bytes", MetricKind::Bytes},
               {"GB/s", MetricKind::Bandwidth},  {"floor", MetricKind::Text},      {"ratio to floor", MetricKind::Ratio}};
  for (const PhaseStat& s : phase_stats(cell)) {
    t.rows.push_back({s.name, static_cast<double>(s.seconds.n), s.seconds.min, s.seconds.median, s.seconds.max,
                      s.bytes > 0 ? Value(s.bytes) : Value(), or_na(s.gbps), floor_text(s), or_na(s.floor_ratio)});
  }
  return t;
}

}  // namespace wsb
