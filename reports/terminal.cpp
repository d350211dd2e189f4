#include "reports/terminal.hpp"

#include <set>

#include <fmt/format.h>

#include "reports/host_table.hpp"
#include "reports/phase_table.hpp"
#include "reports/summary_table.hpp"
#include "reports/verdict.hpp"

namespace wsb {

std::string render_terminal_summary(const Results& r, bool phases) {
  std::string out = "## Summary\n" + render_text(summary_table(r.cells));
  std::set<std::string> hosts;
  for (const Cell& c : r.cells) hosts.insert(c.host);
  if (hosts.size() > 1) out += "\n## Fleet means (equal weight per host, 95% Student-t)\n" + render_text(host_mean_table(r.cells));
  std::string failures;
  for (const Cell& c : r.cells) {
    for (const Failure& f : cell_failures(c)) {
      failures += fmt::format("  {}{}: {}{}\n", f.cell_id, f.trial ? fmt::format(" trial {}", *f.trial) : "", f.what,
                              f.detail.empty() ? "" : " - " + f.detail);
    }
  }
  if (!failures.empty()) out += "\n## Failures\n" + failures;
  if (phases) {
    for (const Cell& c : r.cells) {
      const Table t = phase_table(c);
      if (!t.rows.empty()) out += fmt::format("\n## Phases {} on {}\n", c.id, c.host) + render_text(t);
    }
  }
  return out;
}

}  // namespace wsb
