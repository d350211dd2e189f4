#pragma once
// Fleet statistics: cells of one configuration measured on several hosts, weighted equally per host.
// A host's repeats narrow its own mean but never add a host: the interval is over host means only.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reports/config_key.hpp"
#include "reports/results.hpp"

namespace wsb {

/// Equal-weight mean over host means with the half-width of its 95% Student-t interval, seconds.
struct HostMeanStat {
  double mean = 0;                   ///< mean of the host means
  std::optional<double> half_width;  ///< t_{0.975, h-1} * s / sqrt(h); nullopt when h == 1
  size_t hosts = 0;                  ///< h, hosts that contributed at least one sample
};

/// Quantile p of Student's t distribution with `dof` degrees of freedom (boost::math::students_t).
/// Throws std::domain_error for dof <= 0 or p outside (0, 1).
double student_t_quantile(double p, double dof);

/// Statistic over the given host means; nullopt when empty.
std::optional<HostMeanStat> host_mean_stat(std::span<const double> host_means);

/// Cells of one configuration, possibly from several hosts and files. `cells` point into the caller's
/// storage and are valid as long as it is.
struct ConfigGroup {
  ConfigKey key;
  std::vector<const Cell*> cells;
  std::vector<std::string> hosts;  ///< distinct Cell::host values, in order of first appearance
};

/// Groups cells by config_key, groups and cells in order of first appearance.
std::vector<ConfigGroup> group_by_config(std::span<const Cell> cells);

/// Per host of the group, the mean of times_s[key] over all that host's trials having the key (all cells of the
/// group on that host pooled, failed trials included — see time_samples). Hosts without samples are left out.
std::vector<double> host_means(const ConfigGroup& group, std::string_view key);

/// host_mean_stat(host_means(group, key)).
std::optional<HostMeanStat> group_host_stat(const ConfigGroup& group, std::string_view key);

}  // namespace wsb
