#include "reports/report_markdown.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/checks_table.hpp"
#include "reports/context_table.hpp"
#include "reports/host_table.hpp"
#include "reports/memory_table.hpp"
#include "reports/publication_table.hpp"
#include "reports/phase_table.hpp"
#include "reports/summary_table.hpp"
#include "reports/verdict.hpp"

namespace wsb {
namespace {

bool several_hosts(const Results& r) {
  std::set<std::string> hosts;
  for (const Cell& c : r.cells) hosts.insert(c.host);
  return hosts.size() > 1;
}

// Inline code span for ids; backticks inside would end it early.
std::string code(const std::string& s) {
  std::string clean = s;
  std::replace(clean.begin(), clean.end(), '`', '\'');
  return "`" + clean + "`";
}

std::string failures_section(const Results& r) {
  std::string out;
  for (const Cell& c : r.cells) {
    for (const Failure& f : cell_failures(c)) {
      std::string where = code(f.cell_id);
      if (!f.host.empty()) where += " on " + f.host;
      if (f.trial) where += fmt::format(", trial {}", *f.trial);
      std::string detail = f.detail;
      std::replace(detail.begin(), detail.end(), '\n', ' ');
      out += fmt::format("- {}: **{}**{}\n", where, f.what, detail.empty() ? "" : " \u2014 " + detail);
    }
  }
  return out.empty() ? "None.\n" : out;
}

// Numeric keys of a free-form trial object (memory, probe), prefixed, in key order.
std::set<std::string> numeric_keys(const Cell& cell, nlohmann::json Trial::*member) {
  std::set<std::string> keys;
  for (const Trial& t : cell.trials) {
    for (const auto& [k, v] : (t.*member).items()) {
      if (v.is_number()) keys.insert(k);
    }
  }
  return keys;
}

Table raw_table(const Cell& cell) {
  std::set<std::string> times;
  for (const Trial& t : cell.trials) {
    for (const auto& [k, v] : t.times_s) times.insert(k);
  }
  const std::set<std::string> memory = numeric_keys(cell, &Trial::memory);
  const std::set<std::string> probe = numeric_keys(cell, &Trial::probe);
  Table table;
  table.columns = {{"trial", MetricKind::Count}, {"status", MetricKind::Text}};
  for (const auto& k : times) table.columns.push_back({k + " (s)", MetricKind::Raw});
  for (const auto& k : memory) table.columns.push_back({"memory." + k, MetricKind::Raw});
  for (const auto& k : probe) table.columns.push_back({"probe." + k, MetricKind::Raw});
  auto number = [](const nlohmann::json& obj, const std::string& k) -> Value {
    auto it = obj.find(k);
    if (it == obj.end() || !it->is_number()) return Value{};
    return it->get<double>();
  };
  for (const Trial& t : cell.trials) {
    std::vector<Value> row = {static_cast<double>(t.index), std::string(status_name(t.status))};
    for (const auto& k : times) {
      auto it = t.times_s.find(k);
      row.push_back(it == t.times_s.end() ? Value{} : Value{it->second});
    }
    for (const auto& k : memory) row.push_back(number(t.memory, k));
    for (const auto& k : probe) row.push_back(number(t.probe, k));
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace

std::string render_report_markdown(const Results& r, const ReportOptions& options) {
  std::string out = "# " + options.title;
  if (!r.matrix.empty()) out += " \u2014 matrix " + code(r.matrix);
  out += "\n\n## Context\n\n";
  out += r.hosts.empty() ? render_markdown(context_table(r.context)) : render_markdown(hosts_table(r.hosts));

  out += "\n## Summary\n\n";
  out += "Pause: scheduler gate closed (times_s.pause). Complete loop: prepare start to the first response at the "
         "target version (times_s.envelope). Ranges are min\u2013max over trials.\n\n";
  out += render_markdown(summary_table(r.cells));

  if (several_hosts(r)) {
    out += "\n## Fleet means\n\n";
    out += "Every host weighs the same: each host's mean over its own trials, then the mean of host means; "
           "\u00b1 is the 95% Student-t half-width over host means (n/a with one host).\n\n";
    out += render_markdown(host_mean_table(r.cells));
  }

  out += "\n## Failures\n\n" + failures_section(r);

  const bool any_trial = std::any_of(r.cells.begin(), r.cells.end(), [](const Cell& c) { return !c.trials.empty(); });
  if (any_trial) {
    out += "\n## Checks\n\n";
    out += "Passed/recorded over trials. Fingerprints: every probe response before, during and after the update at "
           "one version with its exact fingerprint; Native equality: per-rank storage checksums equal a fresh native "
           "load; Pointers: every storage kept its address and size.\n\n";
    out += render_markdown(checks_table(r.cells));
    out += "\n## Memory\n\n";
    out += "Maxima over trials (MemAvailable: minimum). Prepare/Commit peak RSS and cgroup peak are sampled every "
           "few ms during prepare and commit; device used counts every process on the GPU.\n\n";
    out += render_markdown(memory_table(r.cells));
  }

  if (any_checkpoint_cell(r.cells)) {
    out += "\n## Publications\n\n";
    out += "Cells on real checkpoints: the publication each cell's trials updated to. Changed: elements that differ "
           "from the base version (a packed FP4 byte counts as two); Compression: checkpoint bytes / stored bytes.\n\n";
    out += render_markdown(publication_table(r.cells));
  }

  if (options.phases) {
    out += "\n## Phases\n\n";
    out += "ratio to floor = time / (bytes / floor bandwidth): 1.00 runs at the measured physical limit, "
           "2.00 takes twice as long.\n";
    for (const Cell& c : r.cells) {
      const Table t = phase_table(c);
      if (t.rows.empty()) continue;
      out += fmt::format("\n### {} on {}\n\n", code(c.id), c.host);
      out += render_markdown(t);
    }
  }

  if (options.raw) {
    out += "\n## Raw samples\n\n<details>\n<summary>Per-trial numbers (times in seconds, exact)</summary>\n";
    for (const Cell& c : r.cells) {
      if (c.trials.empty()) continue;
      out += fmt::format("\n### {} on {}\n\n", code(c.id), c.host);
      out += render_markdown(raw_table(c));
    }
    out += "\n</details>\n";
  }
  return out;
}

void write_report_markdown(const std::filesystem::path& path, const Results& results, const ReportOptions& options) {
  const std::string text = render_report_markdown(results, options);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  out << text;
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("{}: write failed: {}", path.string(), std::strerror(errno)));
}

}  // namespace wsb
