#include "reports/verdict.hpp"

namespace wsb {
namespace {

std::string check_reason(const Check& c) { return c.detail.empty() ? c.name : c.name + ": " + c.detail; }

}  // namespace

CellVerdict cell_verdict(const Cell& cell) {
  if (cell.status == Status::Skipped) return {Status::Skipped, cell.reason};
  bool failed = cell.status == Status::Fail;
  std::string reason = cell.reason;
  for (const Trial& t : cell.trials) {
    if (t.status != Status::Fail) continue;
    failed = true;
    if (reason.empty()) reason = t.reason;
  }
  for (const Trial& t : cell.trials) {
    for (const Check& c : t.checks) {
      if (c.pass) continue;
      failed = true;
      if (reason.empty()) reason = check_reason(c);
    }
  }
  if (!failed) return {Status::Pass, ""};
  return {Status::Fail, reason.empty() ? "no reason recorded" : reason};
}

std::string verdict_text(const CellVerdict& verdict) {
  switch (verdict.status) {
    case Status::Pass: return "pass";
    case Status::Fail: return "FAIL: " + verdict.reason;
    case Status::Skipped: return verdict.reason.empty() ? "skipped" : "skipped: " + verdict.reason;
  }
  return "unknown";
}

std::vector<Failure> cell_failures(const Cell& cell) {
  std::vector<Failure> out;
  if (cell.status == Status::Skipped) return out;
  if (cell.status == Status::Fail && !cell.reason.empty()) {
    out.push_back({cell.id, cell.host, std::nullopt, "cell failed", cell.reason});
  }
  for (const Trial& t : cell.trials) {
    if (t.status == Status::Fail) out.push_back({cell.id, cell.host, t.index, "trial failed", t.reason});
    for (const Check& c : t.checks) {
      if (!c.pass) out.push_back({cell.id, cell.host, t.index, c.name, c.detail});
    }
  }
  if (out.empty() && cell.status == Status::Fail) {
    out.push_back({cell.id, cell.host, std::nullopt, "cell failed", "no reason recorded"});
  }
  return out;
}

}  // namespace wsb
