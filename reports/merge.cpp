#include "reports/merge.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "reports/results_io.hpp"

namespace wsb {
namespace {

// The value every element shares, or `empty` when they differ.
template <class T, class Get>
T common(const std::vector<Context>& hosts, Get get, T empty) {
  const T first = get(hosts.front());
  for (const Context& c : hosts) {
    if (!(get(c) == first)) return empty;
  }
  return first;
}

nlohmann::json common_keys(const std::vector<nlohmann::json>& objects) {
  nlohmann::json out = nlohmann::json::object();
  if (objects.empty() || !objects.front().is_object()) return out;
  for (const auto& [k, v] : objects.front().items()) {
    const bool shared = std::all_of(objects.begin(), objects.end(), [&](const nlohmann::json& o) {
      if (!o.is_object()) return false;
      auto it = o.find(k);
      return it != o.end() && *it == v;
    });
    if (shared) out[k] = v;
  }
  return out;
}

Context common_context(const std::vector<Context>& hosts) {
  Context c;
  c.host = common(hosts, [](const Context& x) { return x.host; }, std::string());
  c.cpu_model = common(hosts, [](const Context& x) { return x.cpu_model; }, std::string());
  c.cpu_cores = common(hosts, [](const Context& x) { return x.cpu_cores; }, int64_t{0});
  c.memory_bytes = common(hosts, [](const Context& x) { return x.memory_bytes; }, uint64_t{0});
  c.kernel = common(hosts, [](const Context& x) { return x.kernel; }, std::string());
  c.os = common(hosts, [](const Context& x) { return x.os; }, std::string());
  c.runtime_detected = common(hosts, [](const Context& x) { return x.runtime_detected; }, std::string());
  c.build_commit = common(hosts, [](const Context& x) { return x.build_commit; }, std::string());
  c.build_type = common(hosts, [](const Context& x) { return x.build_type; }, std::string());
  c.date_utc = common(hosts, [](const Context& x) { return x.date_utc; }, std::string());
  c.gpus = common(hosts, [](const Context& x) { return x.gpus; }, nlohmann::json::array());
  std::vector<nlohmann::json> extras;
  for (const Context& h : hosts) extras.push_back(h.extra);
  c.extra = common_keys(extras);
  return c;
}

}  // namespace

Results merge_results(std::span<const Results> inputs, std::span<const std::string> labels) {
  if (inputs.empty()) throw std::invalid_argument("merge: no results to merge");
  if (!labels.empty() && labels.size() != inputs.size()) {
    throw std::invalid_argument(fmt::format("merge: {} labels for {} inputs", labels.size(), inputs.size()));
  }
  Results out;
  std::vector<std::string> matrices;
  std::vector<nlohmann::json> extras;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Results& in = inputs[i];
    const std::string label = labels.empty() ? fmt::format("input {}", i) : labels[i];
    if (in.schema_version != kResultsSchemaVersion) {
      throw std::runtime_error(fmt::format("{}: schema_version {} cannot be merged (this wsbench reads {})", label,
                                           in.schema_version, kResultsSchemaVersion));
    }
    const std::vector<Context> own = in.hosts.empty() ? std::vector<Context>{in.context} : in.hosts;
    for (const Context& h : own) {
      const bool seen = std::any_of(out.hosts.begin(), out.hosts.end(), [&](const Context& c) { return c.host == h.host; });
      if (!seen) out.hosts.push_back(h);
    }
    for (Cell cell : in.cells) {
      if (cell.host.empty()) cell.host = in.context.host;
      out.cells.push_back(std::move(cell));
    }
    if (!in.matrix.empty() && std::find(matrices.begin(), matrices.end(), in.matrix) == matrices.end()) {
      matrices.push_back(in.matrix);
    }
    extras.push_back(in.extra);
  }
  out.context = common_context(out.hosts);
  out.extra = common_keys(extras);
  for (const std::string& m : matrices) out.matrix += (out.matrix.empty() ? "" : "+") + m;
  return out;
}

Results merge_result_files(std::span<const std::filesystem::path> paths) {
  std::vector<Results> inputs;
  std::vector<std::string> labels;
  for (const auto& p : paths) {
    inputs.push_back(load_results(p));
    labels.push_back(p.string());
  }
  return merge_results(inputs, labels);
}

}  // namespace wsb
