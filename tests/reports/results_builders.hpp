#pragma once
// Small builders for results objects used by the reports tests (a header, so it is not a test executable).
#include <string>
#include <vector>

#include "reports/results.hpp"

namespace wsb::testing {

inline Trial trial(int64_t index, double pause, double envelope) {
  Trial t;
  t.index = index;
  t.times_s = {{"pause", pause}, {"envelope", envelope}};
  t.checks = {Check{"probe_during_prepare", true, "412 responses at v0", nlohmann::json::object()}};
  return t;
}

inline Cell cell(const std::string& model, const std::string& mode, const std::string& runtime, int64_t tp,
                 const std::string& host, const std::vector<std::pair<double, double>>& pause_envelope) {
  Cell c;
  c.model = model;
  c.sync = SyncOptions{parse_sync_mode(mode)};
  c.runtime = runtime;
  c.tp = tp;
  c.id = model + "/" + mode + "/" + runtime + "/tp" + std::to_string(tp);
  c.engine = "embedded-cpu";
  c.host = host;
  c.n = static_cast<int64_t>(pause_envelope.size());
  for (size_t i = 0; i < pause_envelope.size(); ++i) {
    c.trials.push_back(trial(static_cast<int64_t>(i), pause_envelope[i].first, pause_envelope[i].second));
  }
  c.floors = Floors{64.0, 2.0, 55.5, nlohmann::json::object()};
  return c;
}

inline Results results_for(const std::string& host, std::vector<Cell> cells, const std::string& matrix = "smoke") {
  Results r;
  r.context.host = host;
  r.context.cpu_model = "AMD EPYC 9654";
  r.context.cpu_cores = 16;
  r.context.kernel = "6.1.0-fc-test";
  r.matrix = matrix;
  r.cells = std::move(cells);
  return r;
}

/// Two cells on one host: a passing disk cell and a cpu cell whose trial 1 failed its fingerprint check.
inline Results two_cell_results() {
  Cell disk = cell("llama-tiny-bf16", "disk", "native", 2, "h1", {{0.530, 20.44}, {0.512, 20.44}, {0.521, 20.44}});
  Cell cpu = cell("llama-tiny-bf16", "cpu", "gvisor", 2, "h1", {{0.0412, 3.1}, {0.0398, 12.5}});
  cpu.status = Status::Fail;
  cpu.trials[1].status = Status::Fail;
  cpu.trials[1].reason = "fingerprint mismatch after commit";
  cpu.trials[1].checks.push_back(Check{"fingerprint_after_commit", false, "tokens differ at position 3",
                                       nlohmann::json::object()});
  return results_for("h1", {disk, cpu});
}

}  // namespace wsb::testing
