#include "harness/trial.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "core/errors.hpp"
#include "engine/cuda/cupti_tracer.hpp"
#include "harness/context.hpp"
#include "harness/memory_sampler.hpp"
#include "harness/probe.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/refit/sender.hpp"

namespace wsb {
namespace fs = std::filesystem;
namespace {

/// What the timed part of a trial saw: the boot, then prepare and commit of the target under probe traffic.
struct Observed {
  double boot0 = 0;
  double native_load_s = 0;
  UpdateWindow window;
  PrepareReport prepare;
  CommitReport commit;
  std::string update_error;  ///< what prepare or commit threw; empty when both returned
  MemoryPeaks prepare_peaks, commit_peaks;
  bool commit_sampled = false;
  std::chrono::milliseconds sample_period{5};
  std::vector<ProbeSample> samples;
};

/// Per sender rank, the buckets and bytes an embedded refit cell streams: the plan RefitMode sends for the engine's
/// profile, TP layouts and bucket size (every refit of a cell sends the same). Empty for other cells, and for http
/// engines, whose protocol chooses its own buckets.
std::vector<RankStream> refit_streams(const MatrixCell& cell, const EngineOptions& options) {
  if (cell.sync.mode != SyncModeKind::Refit || cell.uses_http()) return {};
  const auto shards = refit::plan_rank_shards(options.profile.canonical_tensors(),
                                              build_rank_layouts(options.profile, options.tp));
  const auto plan = refit::plan_rank_streams(shards, refit::refit_bucket_bytes(options.sync.refit.bucket_bytes, shards));
  std::vector<RankStream> out;
  for (size_t r = 0; r < plan.size(); ++r) {
    out.push_back(RankStream{.rank = static_cast<int64_t>(r), .buckets = plan[r].buckets, .bytes = plan[r].bytes});
  }
  return out;
}

std::vector<Phase> phase_records(const std::vector<PhaseRecord>& records) {
  // Aggregate repeated records (per storage / per rank) under one name, keeping first-seen order.
  std::vector<Phase> out;
  std::map<std::string, size_t> index;
  for (const auto& r : records) {
    auto [it, inserted] = index.try_emplace(r.name, out.size());
    if (inserted) {
      Phase p;
      p.name = r.name;
      p.floor = floor_name(r.floor);
      out.push_back(std::move(p));
    }
    out[it->second].seconds += r.seconds;
    out[it->second].bytes += r.bytes;
  }
  return out;
}

/// Offsets in seconds from the trial start (the fresh engine's boot) for the trace of `wsbench report trace`:
/// {native_load, prepare, commit, pause: {start_s, end_s}, first_target_s, decode_steps_s}. The pause's start is
/// estimated: the engine reports only its length, and the gate reopens just before commit returns, so the pause is
/// placed ending at the commit's end ("estimated": true). At most kMaxSteps decode steps are kept.
nlohmann::json timeline_json(const Observed& o, double first_target) {
  constexpr size_t kMaxSteps = 20000;
  const double trial0 = o.boot0;
  auto rel = [trial0](double t) { return std::round((t - trial0) * 1e6) / 1e6; };  // microsecond resolution
  auto span = [&](double a, double b) { return nlohmann::json{{"start_s", rel(a)}, {"end_s", rel(b)}}; };
  const UpdateWindow& w = o.window;
  nlohmann::json out{{time_keys::kNativeLoad, span(trial0, trial0 + o.native_load_s)}};
  if (w.prepare_end > 0) out[time_keys::kPrepare] = span(w.prepare_start, w.prepare_end);
  if (w.commit_end > 0) {
    out[time_keys::kCommit] = span(w.commit_start, w.commit_end);
    if (o.commit.pause_seconds) {
      out[time_keys::kPause] = span(std::max(w.commit_start, w.commit_end - *o.commit.pause_seconds), w.commit_end);
      out[time_keys::kPause]["estimated"] = true;
    }
  }
  if (first_target > 0) out["first_target_s"] = rel(first_target);
  std::vector<double> steps;
  for (const auto& s : o.samples) steps.insert(steps.end(), s.step_times.begin(), s.step_times.end());
  std::sort(steps.begin(), steps.end());
  if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);
  nlohmann::json rel_steps = nlohmann::json::array();
  for (double t : steps) rel_steps.push_back(rel(t));
  out["decode_steps_s"] = rel_steps;
  return out;
}

/// Prepare and commit of `target` while the probe client runs, with the memory sampled during each.
void update_under_probe(EngineClient& client, uint32_t from, uint32_t target, bool devices,
                        const std::function<void(const char*)>& report, Observed& o) {
  ProbeClient probe(client);
  probe.start();
  probe.wait_for_version(from, 30.0);
  // Memory peaks during prepare and during commit, sampled every 5 ms off the measured threads (devices only on
  // CUDA cells: a first cudaMemGetInfo would create a context on a CPU cell).
  MemorySampler prepare_sampler(o.sample_period, devices);
  MemorySampler commit_sampler(o.sample_period, devices);
  prepare_sampler.start();
  o.window.prepare_start = steady_seconds();
  try {
    report("prepare");
    o.prepare = client.prepare(target);
    o.window.prepare_end = steady_seconds();
    o.prepare_peaks = prepare_sampler.stop();
    report("commit");
    commit_sampler.start();
    o.commit_sampled = true;
    o.window.commit_start = steady_seconds();
    o.commit = client.commit(target);
    o.window.commit_end = steady_seconds();
  } catch (const std::exception& e) {
    o.update_error = e.what();
  }
  if (o.window.prepare_end == 0) o.prepare_peaks = prepare_sampler.stop();
  if (o.commit_sampled) o.commit_peaks = commit_sampler.stop();
  // Two responses to requests sent after the commit returned (probes_after_commit needs one; the check of their
  // version is the verifier's), waiting as long as the engine keeps answering.
  if (o.update_error.empty()) probe.wait_for_sent_after(o.window.commit_end, 2, 30.0);
  probe.stop();
  o.samples = probe.samples();
}

/// A prepare of a version that was never published, and whether the engine's state is what it was just before:
/// its weight version, its storage checksums (`checksums`, read just before) and its fingerprint. Compared with the
/// state before the attempt, not with the target's: after a failed update the engine rightly still serves the
/// version it had, and the check is that this attempt changed nothing.
MissingTargetOutcome try_missing_target(EngineClient& client, uint32_t missing, const Checksums& checksums) {
  MissingTargetOutcome o;
  o.missing = missing;
  o.engine_reports_kinds = client.reports_error_kinds();
  const uint32_t version_before = client.weight_version();
  const std::string fp_before = fingerprint(client.generate(probe_request()));
  try {
    client.prepare(missing);
    o.accepted = true;
  } catch (const Error& e) {
    o.kind = e.kind();
    o.message = e.what();
  }
  const std::string fp_after = fingerprint(client.generate(probe_request()));
  o.unchanged = client.weight_version() == version_before &&
                checksum_diff(client.storage_checksums(), checksums).empty() && fp_after == fp_before;
  return o;
}

nlohmann::json memory_record(const Observed& o, EngineClient& client, bool http) {
  nlohmann::json memory = memory_snapshot();
  memory["prepare_peak"] = memory_peaks_json(o.prepare_peaks, o.sample_period);
  if (o.commit_sampled) memory["commit_peak"] = memory_peaks_json(o.commit_peaks, o.sample_period);
  // gVisor reports no VmHWM (0): the peak is then the sampled one, and says so.
  if (memory.value("rss_peak_bytes", uint64_t{0}) == 0) {
    memory["rss_peak_bytes"] = std::max(o.prepare_peaks.rss_peak_bytes, o.commit_peaks.rss_peak_bytes);
    memory["rss_peak_source"] = "sampled during prepare and commit (VmHWM unavailable)";
  }
  if (const auto mode_memory = client.mode_memory()) {
    memory["mode_canonical_bytes"] = mode_memory->canonical_bytes;
    memory["mode_rank_image_bytes"] = mode_memory->rank_image_bytes;
    memory["mode_staging_bytes"] = mode_memory->staging_bytes;
  }
  if (http) memory["process"] = "the profiler's (the client); the engine runs in its server";
  return memory;
}

std::map<std::string, double> times_record(const Observed& o, double first_target) {
  std::map<std::string, double> times{{time_keys::kNativeLoad, o.native_load_s}};
  if (!o.update_error.empty()) return times;
  times[time_keys::kPrepare] = o.prepare.seconds;
  times[time_keys::kCommit] = o.window.commit_end - o.window.commit_start;
  // A pause nobody measured is absent (n/a in the tables, skipped by the statistics), never 0: the commit call's
  // duration is its upper bound.
  if (o.commit.pause_seconds) times[time_keys::kPause] = *o.commit.pause_seconds;
  times[time_keys::kPauseBound] = o.window.commit_end - o.window.commit_start;
  if (first_target > 0) times[time_keys::kEnvelope] = first_target - o.window.prepare_start;
  times[time_keys::kMaxStall] = max_step_gap(o.samples);
  if (o.commit.cupti_overhead_seconds > 0) times[time_keys::kCuptiOverhead] = o.commit.cupti_overhead_seconds;
  return times;
}

nlohmann::json probe_record(const ProbeTally& t) {
  return {{"responses", t.responses},       {"before_commit", t.before_commit}, {"during_prepare", t.during_prepare},
          {"after_commit", t.after_commit}, {"errors", t.errors},               {"restarted_by_commit", t.restarts},
          {"aborted", t.aborted},           {"mixed_versions", t.mixed}};
}

/// The body of one trial; throws when the engine stops answering (run_trial records that as a failed check).
void run_trial_body(int index, const TrialSetup& in, std::string& previous_fp, CheckList& checks, Trial& trial,
                    std::unique_ptr<EngineClient>& client_ptr) {
  const MatrixCell& cell = in.cell;
  const uint32_t target = cell.target;
  EngineLaunch launch = in.launch;
  launch.options.workdir = launch.options.workdir / fmt::format("trial-{}", index);
  std::error_code ec;
  fs::remove_all(launch.options.workdir, ec);
  fs::create_directories(launch.options.workdir);
  const auto report = [&](const char* phase) { in.progress.report(index, cell.n, phase); };

  // Boot.
  report("boot");
  reset_peak_rss();
  Observed o;
  o.boot0 = steady_seconds();
  client_ptr = start_engine(launch, in.v0_dir, 0);
  EngineClient& client = *client_ptr;
  o.native_load_s = steady_seconds() - o.boot0;
  trial.times_s = {{time_keys::kNativeLoad, o.native_load_s}};

  const std::string fp0 = fingerprint(client.generate(probe_request()));
  if (!previous_fp.empty()) checks.add(check_fresh_engines_agree(fp0, previous_fp));
  previous_fp = fp0;
  const auto pointers0 = client.storage_pointers();

  // The updates before the measured one (a cell's `updates`), each to the next version: the engine the measured
  // update meets is one that has updated before.
  uint32_t from = 0;
  std::string fp_from = fp0;
  if (cell.updates > 1) {
    nlohmann::json earlier = nlohmann::json::array();
    for (uint32_t v = 1; v < cell.updates; ++v) {
      report("earlier update");
      try {
        const PrepareReport prepared = client.prepare(v);
        const double t1 = steady_seconds();
        client.commit(v);
        earlier.push_back({{"target", v}, {"prepare_s", prepared.seconds}, {"commit_s", steady_seconds() - t1}});
      } catch (const std::exception& e) {
        checks.add(check_update_succeeds(fmt::format("earlier update to {} (before the measured one): {}",
                                                     version_string(v), e.what())));
        trial.extra["earlier_updates"] = earlier;
        return;
      }
      from = v;
    }
    trial.extra["earlier_updates"] = earlier;
    fp_from = fingerprint(client.generate(probe_request()));
  }
  checks.add(check_update_changes_fingerprint(fp_from, in.target.fingerprint, from, cell.density == 0.0));

  // The update, timed.
  update_under_probe(client, from, target, cell.uses_cuda(), report, o);

  // Verification.
  report("verify");
  ProbeExpectation expect{fp_from, target, in.target.fingerprint, cell.accept_mixed_responses};
  expect.from = from;
  const ProbeTally tally = tally_probes(o.samples, o.window, expect);
  checks.add(check_update_succeeds(o.update_error));
  checks.add(check_probes_exact(tally));
  checks.add(check_generation_during_prepare(o.samples, o.window, o.update_error.empty(), tally.during_prepare));
  checks.add(check_probes_after_commit(tally));
  checks.add(check_version_is_target(client.weight_version(), target));
  const Checksums checksums = client.storage_checksums();
  trial.extra["checksum_basis"] = client.checksum_basis();
  if (client.reports_checksums()) {
    checks.add(check_checksums_equal_native_load(checksums, in.target.checksums, target));
  } else {
    checks.skip(check_names::kChecksumsEqualNativeLoad,
                client.checksum_basis() + "; equality with a fresh native load rests on the fingerprints");
  }
  if (pointers0.empty()) {
    checks.skip(check_names::kStoragePointersUnchanged,
                "the engine reports no storage pointers (GET /wsbench/storage_pointers)");
  } else {
    checks.add(check_storage_pointers_unchanged(pointers0, client.storage_pointers()));
  }
  checks.add(check_missing_target_rejected(
      try_missing_target(client, cell.publish_versions + 1000, checksums)));

  // Records.
  trial.times_s = times_record(o, tally.first_target);
  std::vector<PhaseRecord> phases = client.boot_phases();
  phases.insert(phases.end(), o.prepare.phases.begin(), o.prepare.phases.end());
  phases.insert(phases.end(), o.commit.phases.begin(), o.commit.phases.end());
  trial.phases = phase_records(phases);
  trial.refit_streams = refit_streams(cell, launch.options);
  if (cell.uses_cuda()) trial.extra["cupti"] = cupti_json(o.commit.cupti);
  trial.memory = memory_record(o, client, cell.uses_http());
  trial.extra["timeline"] = timeline_json(o, tally.first_target);
  trial.probe = probe_record(tally);
  if (const auto warnings = client.warnings(); !warnings.empty()) trial.extra["warnings"] = warnings;
}

}  // namespace

Trial run_trial(int index, const TrialSetup& setup, std::string& previous_v0_fingerprint) {
  CheckList checks;
  Trial trial;
  trial.index = index;
  std::unique_ptr<EngineClient> client;
  try {
    run_trial_body(index, setup, previous_v0_fingerprint, checks, trial, client);
  } catch (const std::exception& e) {
    checks.add(check_engine_answers(e.what()));
  }
  if (client) {
    nlohmann::json server = client->shutdown();
    if (!server.is_null()) {
      if (checks.passed()) server.erase("log_tail");
      trial.extra["server"] = std::move(server);
    }
  }
  trial.status = checks.passed() ? Status::Pass : Status::Fail;
  trial.reason = checks.reason();
  trial.checks = checks.checks();
  if (!setup.keep_workdir) {
    // Its engine is gone: the next trial's needs the disk (a disk-mode checkpoint, twice while one replaces another).
    std::error_code ec;
    fs::remove_all(setup.launch.options.workdir / fmt::format("trial-{}", index), ec);
  }
  return trial;
}

}  // namespace wsb
