#include "reports/phase_stats.hpp"

#include <algorithm>
#include <map>

namespace wsb {

std::optional<double> floor_gbps(const Floors& floors, std::string_view name) {
  std::optional<double> v;
  if (name.empty()) return std::nullopt;
  if (name == "disk_read") {
    v = floors.disk_read_gbps;
  } else if (name == "host_memcpy") {
    v = floors.host_memcpy_gbps;
  } else if (name == "h2d") {
    v = floors.h2d_gbps;
  } else if (floors.extra.is_object()) {
    auto it = floors.extra.find(std::string(name) + "_gbps");
    if (it != floors.extra.end() && it->is_number()) v = it->get<double>();
  }
  if (v && *v > 0) return v;
  return std::nullopt;
}

std::vector<PhaseStat> phase_stats(const Cell& cell) {
  struct Acc {
    std::string floor;
    std::vector<double> seconds;
    std::vector<double> bytes;
  };
  std::vector<std::string> order;
  std::map<std::string, Acc> acc;
  for (const Trial& t : cell.trials) {
    std::map<std::string, std::pair<double, double>> per_trial;  // name -> (seconds, bytes) summed
    std::vector<std::string> trial_order;
    for (const Phase& p : t.phases) {
      auto [it, fresh] = per_trial.emplace(p.name, std::pair<double, double>{0, 0});
      if (fresh) trial_order.push_back(p.name);
      it->second.first += p.seconds;
      it->second.second += static_cast<double>(p.bytes);
      auto [a, new_name] = acc.emplace(p.name, Acc{p.floor, {}, {}});
      if (new_name) order.push_back(p.name);
    }
    for (const std::string& name : trial_order) {
      acc[name].seconds.push_back(per_trial[name].first);
      acc[name].bytes.push_back(per_trial[name].second);
    }
  }
  std::vector<PhaseStat> out;
  for (const std::string& name : order) {
    const Acc& a = acc[name];
    PhaseStat s;
    s.name = name;
    s.floor = a.floor;
    s.seconds = *summarize(a.seconds);
    s.bytes = *median(a.bytes);
    if (s.bytes > 0 && s.seconds.median > 0) s.gbps = s.bytes / s.seconds.median / 1e9;
    if (cell.floors) s.floor_gbps = floor_gbps(*cell.floors, s.floor);
    if (s.floor_gbps && s.bytes > 0) s.floor_ratio = s.seconds.median / (s.bytes / (*s.floor_gbps * 1e9));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace wsb
