#include "reports/context_table.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "reports/format.hpp"

namespace wsb {
namespace {

std::string json_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string gpu_name(const nlohmann::json& g) {
  if (g.is_object()) {
    auto it = g.find("name");
    if (it != g.end() && it->is_string()) return it->get<std::string>();
  }
  return json_text(g);
}

}  // namespace

std::string gpus_text(const nlohmann::json& gpus) {
  if (!gpus.is_array()) return "";
  std::vector<std::pair<std::string, size_t>> counts;  // first-appearance order
  for (const auto& g : gpus) {
    const std::string name = gpu_name(g);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == name; });
    if (it == counts.end()) {
      counts.emplace_back(name, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [name, n] : counts) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} \u00d7 {}", n, name);
  }
  return out;
}

Table context_table(const Context& c) {
  Table t;
  t.columns = {{"Field", MetricKind::Text}, {"Value", MetricKind::Text}};
  auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) t.rows.push_back({std::string(key), value});
  };
  add("host", c.host);
  add("cpu_model", c.cpu_model);
  add("cpu_cores", c.cpu_cores > 0 ? std::to_string(c.cpu_cores) : "");
  add("memory", c.memory_bytes > 0 ? format_bytes(static_cast<double>(c.memory_bytes)) : "");
  add("gpus", gpus_text(c.gpus));
  add("kernel", c.kernel);
  add("os", c.os);
  add("runtime_detected", c.runtime_detected);
  add("build_commit", c.build_commit);
  add("build_type", c.build_type);
  add("date_utc", c.date_utc);
  if (c.extra.is_object()) {
    for (const auto& [k, v] : c.extra.items()) add(k.c_str(), json_text(v));
  }
  return t;
}

Table hosts_table(std::span<const Context> hosts) {
  Table t;
  t.columns = {{"Host", MetricKind::Text},   {"CPU", MetricKind::Text},     {"cores", MetricKind::Count},
               {"memory", MetricKind::Bytes}, {"GPUs", MetricKind::Text},    {"runtime", MetricKind::Text},
               {"kernel", MetricKind::Text},  {"commit", MetricKind::Text},  {"date", MetricKind::Text}};
  for (const Context& c : hosts) {
    t.rows.push_back({c.host, c.cpu_model, static_cast<double>(c.cpu_cores), static_cast<double>(c.memory_bytes),
                      gpus_text(c.gpus), c.runtime_detected, c.kernel, c.build_commit, c.date_utc});
  }
  return t;
}

}  // namespace wsb
