#pragma once
// Per-cell statistics over trials.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "reports/results.hpp"

namespace wsb {

/// Order statistics and mean of a sample (same unit as the samples).
struct Summary {
  size_t n = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double median = 0;  ///< middle value; mean of the two middle values for an even count
  bool operator==(const Summary&) const = default;
};

/// Summary of `samples`; nullopt when empty.
std::optional<Summary> summarize(std::span<const double> samples);

/// Median of `samples` (mean of the two middle values for an even count); nullopt when empty.
std::optional<double> median(std::span<const double> samples);

/// Arithmetic mean; nullopt when empty.
std::optional<double> mean(std::span<const double> samples);

/// Sample standard deviation (n - 1 denominator); nullopt for fewer than two samples.
std::optional<double> sample_stdev(std::span<const double> samples);

/// times_s[key] of every trial of `cell` that has the key, in trial order, seconds. Failed trials count too:
/// a time the harness recorded was measured, and the Checks column says whether the cell passed.
std::vector<double> time_samples(const Cell& cell, std::string_view key);

/// summarize(time_samples(cell, key)).
std::optional<Summary> time_summary(const Cell& cell, std::string_view key);

}  // namespace wsb
