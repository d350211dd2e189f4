#pragma once
// Number formatting driven by a metric's kind (nvbench-style hints), so every table prints a duration, a byte
// count or a bandwidth the same way.
//
// Rules (seconds): |v| >= 10 -> 2 decimals ("20.44"); 0.01 <= |v| < 10 or v == 0 -> 3 decimals ("0.512");
// below 0.01 -> 3 significant digits, at most 9 decimals ("0.000412"). A range or mean ± CI uses the decimals
// of its larger magnitude for both numbers so they line up ("9.50–10.20 s").
#include <optional>
#include <string>
#include <string_view>

namespace wsb {

/// What a table column or metric holds; decides formatting, unit row and alignment.
enum class MetricKind {
  Text,            ///< free text, left-aligned
  Count,           ///< integer count
  Duration,        ///< seconds, bare number; unit row "(s)"
  DurationRange,   ///< "min–max s" (self-describing)
  DurationMeanCI,  ///< "mean ± half-width s" (self-describing)
  Bytes,           ///< decimal SI with unit, "16.06 GB" (self-describing)
  Bandwidth,       ///< GB/s (1e9 bytes/s), 2 decimals; unit row "(GB/s)"
  Ratio,           ///< dimensionless, 2 decimals
  Raw,             ///< a number printed exactly (shortest round-trip form), for raw samples
  Percent,         ///< a percentage (1.23 means 1.23 %), 2 decimals; unit row "(%)"
};

/// Unit shown in a table's units row for `kind` ("s", "GB/s"), or "" when the values carry their own.
std::string_view metric_unit(MetricKind kind);

/// Decimals used for a duration of magnitude |seconds| (see the rules above).
int duration_decimals(double seconds);

/// Bare seconds, e.g. "0.512", "20.44".
std::string format_seconds(double seconds);

/// "0.512–0.530 s" (en dash U+2013); a single "20.44 s" when both ends print the same.
std::string format_duration_range(double min_s, double max_s);

/// "2.000 ± 2.484 s"; "2.000 s ± n/a" when there is no interval (one host).
std::string format_mean_ci(double mean_s, std::optional<double> half_width_s);

/// Decimal SI bytes: "512 B", "1.50 kB", "16.06 GB" (1 kB = 1000 B, as GB/s floors are quoted).
std::string format_bytes(double bytes);

/// Two decimals: "55.50".
std::string format_fixed2(double value);

/// Shortest text that reads back as the same double, e.g. "0.5123".
std::string format_raw(double value);

/// Integer text, rounded: "3".
std::string format_count(double value);

/// Text for a missing value in any column.
inline constexpr std::string_view kNotAvailable = "n/a";

}  // namespace wsb
