#include "reports/host_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <boost/math/distributions/students_t.hpp>

#include "reports/stats.hpp"

namespace wsb {

double student_t_quantile(double p, double dof) {
  if (!(dof > 0) || !(p > 0 && p < 1)) throw std::domain_error("student_t_quantile: need dof > 0 and 0 < p < 1");
  boost::math::students_t dist(dof);
  return boost::math::quantile(dist, p);
}

std::optional<HostMeanStat> host_mean_stat(std::span<const double> host_means) {
  if (host_means.empty()) return std::nullopt;
  HostMeanStat out;
  out.hosts = host_means.size();
  out.mean = *mean(host_means);
  if (out.hosts >= 2) {
    const double h = static_cast<double>(out.hosts);
    out.half_width = student_t_quantile(0.975, h - 1) * *sample_stdev(host_means) / std::sqrt(h);
  }
  return out;
}

std::vector<ConfigGroup> group_by_config(std::span<const Cell> cells) {
  std::vector<ConfigGroup> groups;
  std::map<ConfigKey, size_t> index;
  for (const Cell& c : cells) {
    const ConfigKey key = config_key(c);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back(ConfigGroup{key, {}, {}});
    ConfigGroup& g = groups[it->second];
    g.cells.push_back(&c);
    if (std::find(g.hosts.begin(), g.hosts.end(), c.host) == g.hosts.end()) g.hosts.push_back(c.host);
  }
  return groups;
}

std::vector<double> host_means(const ConfigGroup& group, std::string_view key) {
  std::vector<double> out;
  for (const std::string& host : group.hosts) {
    std::vector<double> pooled;
    for (const Cell* c : group.cells) {
      if (c->host != host) continue;
      const std::vector<double> s = time_samples(*c, key);
      pooled.insert(pooled.end(), s.begin(), s.end());
    }
    if (auto m = mean(pooled)) out.push_back(*m);
  }
  return out;
}

std::optional<HostMeanStat> group_host_stat(const ConfigGroup& group, std::string_view key) {
  const std::vector<double> means = host_means(group, key);
  return host_mean_stat(means);
}

}  // namespace wsb
