#include "reports/trace.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/stats.hpp"

namespace wsb {
namespace {

using nlohmann::json;

constexpr int kTrialTid = 1, kPauseTid = 2, kPhasesTid = 3, kDecodeTid = 4;

double us(double seconds) { return std::round(seconds * 1e9) / 1e3; }  // to microseconds, ns resolution

json event(const std::string& name, int tid, double start_s, double dur_s, json args = json::object()) {
  json e{{"name", name}, {"cat", "wsbench"}, {"ph", "X"}, {"pid", 1}, {"tid", tid},
         {"ts", us(start_s)}, {"dur", us(std::max(0.0, dur_s))}};
  if (!args.empty()) e["args"] = std::move(args);
  return e;
}

json thread_name(int tid, const char* name) {
  return {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}};
}

/// Start of a stage in the timeline block, when recorded.
std::optional<double> timeline_start(const Trial& t, const char* stage) {
  auto it = t.extra.find("timeline");
  if (it == t.extra.end() || !it->is_object()) return std::nullopt;
  auto s = it->find(stage);
  if (s == it->end() || !s->is_object()) return std::nullopt;
  auto v = s->find("start_s");
  if (v == s->end() || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<double> time_of(const Trial& t, const char* key) {
  auto it = t.times_s.find(key);
  if (it == t.times_s.end()) return std::nullopt;
  return it->second;
}

std::vector<double> decode_steps(const Trial& t) {
  std::vector<double> out;
  auto it = t.extra.find("timeline");
  if (it == t.extra.end() || !it->is_object()) return out;
  auto s = it->find("decode_steps_s");
  if (s == it->end() || !s->is_array()) return out;
  for (const json& v : *s) {
    if (v.is_number()) out.push_back(v.get<double>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

json trial_trace(const Cell& cell, const Trial& trial) {
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                    {"args", {{"name", fmt::format("{} on {} trial {}", cell.id, cell.host, trial.index)}}}});
  events.push_back(thread_name(kTrialTid, "trial"));
  events.push_back(thread_name(kPauseTid, "pause"));
  events.push_back(thread_name(kPhasesTid, "phases"));
  events.push_back(thread_name(kDecodeTid, "decode"));

  const double load = time_of(trial, time_keys::kNativeLoad).value_or(0);
  const double prepare = time_of(trial, time_keys::kPrepare).value_or(0);
  const double commit = time_of(trial, time_keys::kCommit).value_or(0);
  const double load0 = timeline_start(trial, time_keys::kNativeLoad).value_or(0);
  const double prepare0 = timeline_start(trial, time_keys::kPrepare).value_or(load0 + load);
  const double commit0 = timeline_start(trial, time_keys::kCommit).value_or(prepare0 + prepare);
  if (time_of(trial, time_keys::kNativeLoad)) events.push_back(event("native_load", kTrialTid, load0, load));
  if (time_of(trial, time_keys::kPrepare)) events.push_back(event("prepare", kTrialTid, prepare0, prepare));
  if (time_of(trial, time_keys::kCommit)) events.push_back(event("commit", kTrialTid, commit0, commit));
  if (auto pause = time_of(trial, time_keys::kPause)) {
    const double start = timeline_start(trial, time_keys::kPause).value_or(commit0 + std::max(0.0, commit - *pause));
    events.push_back(event("pause", kPauseTid, start, *pause));
  }

  double cursor_boot = load0, cursor_prepare = prepare0, cursor_commit = commit0;
  for (const Phase& p : trial.phases) {
    double* cursor = &cursor_boot;
    if (p.name.rfind("prepare.", 0) == 0) cursor = &cursor_prepare;
    if (p.name.rfind("commit.", 0) == 0) cursor = &cursor_commit;
    json args{{"bytes", p.bytes}};
    if (!p.floor.empty()) args["floor"] = p.floor;
    events.push_back(event(p.name, kPhasesTid, *cursor, p.seconds, args));
    *cursor += p.seconds;
  }

  const std::vector<double> steps = decode_steps(trial);
  std::vector<double> gaps;
  for (size_t i = 1; i < steps.size(); ++i) gaps.push_back(steps[i] - steps[i - 1]);
  const double typical = median(gaps).value_or(0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double dur = i == 0 ? typical : std::min(typical, steps[i] - steps[i - 1]);
    events.push_back(event("decode_step", kDecodeTid, steps[i] - dur, dur));
  }

  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"cell", cell.id}, {"host", cell.host}, {"trial", trial.index}, {"status", status_name(trial.status)}}}};
}

const Trial& find_trial(const Results& results, const std::string& where, const std::string& cell_id,
                        int64_t trial_index, const Cell** cell_out) {
  std::vector<std::string> ids;
  for (const Cell& c : results.cells) {
    if (c.id != cell_id) {
      ids.push_back(c.id);
      continue;
    }
    std::vector<std::string> indices;
    for (const Trial& t : c.trials) {
      if (t.index == trial_index) {
        if (cell_out != nullptr) *cell_out = &c;
        return t;
      }
      indices.push_back(std::to_string(t.index));
    }
    throw std::runtime_error(fmt::format("{}: cell '{}' has no trial {} (trials: {})", where, cell_id, trial_index,
                                         indices.empty() ? "none" : fmt::format("{}", fmt::join(indices, ", "))));
  }
  throw std::runtime_error(fmt::format("{}: no cell '{}' (cells: {})", where, cell_id,
                                       ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", "))));
}

}  // namespace wsb
