#include "reports/table.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace wsb {
namespace {

[[noreturn]] void mismatch(const Column& column) {
  throw std::logic_error(fmt::format("table column '{}': value type does not match its metric kind", column.header));
}

}  // namespace

size_t display_width(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++n;  // count lead bytes only
  }
  return n;
}

std::string format_value(const Column& column, const Value& value) {
  using T = Value::Type;
  if (value.type() == T::Missing) return std::string(kNotAvailable);
  switch (column.kind) {
    case MetricKind::Text:
      if (value.type() == T::Text) return value.text();
      mismatch(column);
    case MetricKind::DurationRange:
      if (value.type() == T::Range) return format_duration_range(value.range().min, value.range().max);
      mismatch(column);
    case MetricKind::DurationMeanCI:
      if (value.type() == T::MeanCI) return format_mean_ci(value.mean_ci().mean, value.mean_ci().half_width);
      mismatch(column);
    default: break;
  }
  if (value.type() != T::Number) mismatch(column);
  const double d = value.number();
  switch (column.kind) {
    case MetricKind::Count: return format_count(d);
    case MetricKind::Duration: return format_seconds(d);
    case MetricKind::Bytes: return format_bytes(d);
    case MetricKind::Bandwidth:
    case MetricKind::Ratio:
    case MetricKind::Percent: return format_fixed2(d);
    case MetricKind::Raw: return format_raw(d);
    default: mismatch(column);
  }
}

}  // namespace wsb
