#include "reports/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace wsb {

std::optional<double> mean(std::span<const double> samples) {
  if (samples.empty()) return std::nullopt;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

std::optional<double> median(std::span<const double> samples) {
  if (samples.empty()) return std::nullopt;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  if (sorted.size() % 2 == 1) return sorted[mid];
  return (sorted[mid - 1] + sorted[mid]) / 2.0;
}

std::optional<double> sample_stdev(std::span<const double> samples) {
  if (samples.size() < 2) return std::nullopt;
  const double m = *mean(samples);
  double sq = 0;
  for (double x : samples) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(samples.size() - 1));
}

std::optional<Summary> summarize(std::span<const double> samples) {
  if (samples.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  return Summary{samples.size(), *lo, *hi, *mean(samples), *median(samples)};
}

std::vector<double> time_samples(const Cell& cell, std::string_view key) {
  std::vector<double> out;
  for (const Trial& t : cell.trials) {
    auto it = t.times_s.find(std::string(key));
    if (it != t.times_s.end()) out.push_back(it->second);
  }
  return out;
}

std::optional<Summary> time_summary(const Cell& cell, std::string_view key) {
  const std::vector<double> s = time_samples(cell, key);
  return summarize(s);
}

}  // namespace wsb
