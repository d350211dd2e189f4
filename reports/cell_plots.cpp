#include "reports/cell_plots.hpp"

#include <algorithm>

#include "reports/metric_floor.hpp"
#include "reports/stats.hpp"

namespace wsb {
namespace {

PlotJob cell_plot(std::span<const Cell> cells, const char* key, const char* stem, const char* what) {
  const bool several_hosts =
      std::any_of(cells.begin(), cells.end(), [&](const Cell& c) { return c.host != cells.front().host; });
  Plot p;
  p.title = std::string(what) + " per cell";
  p.value_title = std::string(what) + " mean, min-max over trials";
  p.series = false;
  std::optional<double> lo, hi;
  for (const Cell& c : cells) {
    PlotPoint pp;
    pp.label = several_hosts ? c.id + "\n" + c.host : c.id;
    if (auto s = time_summary(c, key)) {
      pp.value = s->mean;
      pp.low = s->min;
      pp.high = s->max;
      if (s->mean > 0) {
        lo = std::min(lo.value_or(s->mean), s->mean);
        hi = std::max(hi.value_or(s->mean), s->mean);
      }
    }
    pp.floor = metric_floor_seconds(c, key);
    p.points.push_back(std::move(pp));
  }
  p.log_y = lo && hi && *hi > 100 * *lo;
  return PlotJob{stem, std::move(p)};
}

}  // namespace

std::vector<PlotJob> cell_plot_jobs(std::span<const Cell> cells) {
  return {cell_plot(cells, time_keys::kPause, "pause", "pause"),
          cell_plot(cells, time_keys::kEnvelope, "loop", "complete loop (envelope)")};
}

}  // namespace wsb
