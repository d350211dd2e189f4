#include "harness/profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "harness/context.hpp"
#include "engine_api/engine_client.hpp"
#include "harness/memory_sampler.hpp"
#include "harness/physics.hpp"
#include "harness/probe.hpp"
#include "harness/progress.hpp"
#include "core/errors.hpp"
#include "publisher/publisher.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

/// Per-trial check list: every check is recorded, the first failure becomes the trial's reason.
class Checks {
 public:
  void add(const std::string& name, bool pass, const std::string& detail) {
    list_.push_back({{"name", name}, {"pass", pass}, {"detail", detail}});
    if (!pass && reason_.empty()) reason_ = name + ": " + detail;
  }
  /// A check the engine cannot be asked for (recorded as passed, "skipped": true, with the reason).
  void skip(const std::string& name, const std::string& why) {
    list_.push_back({{"name", name}, {"pass", true}, {"skipped", true}, {"detail", why}});
  }
  bool passed() const { return reason_.empty(); }
  const std::string& reason() const { return reason_; }
  const nlohmann::json& json() const { return list_; }

 private:
  nlohmann::json list_ = nlohmann::json::array();
  std::string reason_;
};

using Checksums = std::vector<std::map<std::string, std::string>>;

/// "" when equal, else the first differing storages.
std::string checksum_diff(const Checksums& actual, const Checksums& expected) {
  if (actual.size() != expected.size()) return fmt::format("{} ranks vs {}", actual.size(), expected.size());
  std::vector<std::string> diffs;
  for (size_t r = 0; r < actual.size(); ++r) {
    for (const auto& [name, hash] : expected[r]) {
      auto it = actual[r].find(name);
      if (it == actual[r].end() || it->second != hash) diffs.push_back(fmt::format("rank {} '{}'", r, name));
    }
    if (actual[r].size() != expected[r].size()) diffs.push_back(fmt::format("rank {} storage count", r));
  }
  if (diffs.empty()) return "";
  if (diffs.size() > 3) {
    const size_t total = diffs.size();
    diffs.resize(3);
    diffs.push_back(fmt::format("... {} in all", total));
  }
  return fmt::format("{}", fmt::join(diffs, ", "));
}

std::string pointer_diff(const std::vector<std::vector<StoragePointer>>& a,
                         const std::vector<std::vector<StoragePointer>>& b) {
  if (a.size() != b.size()) return "rank count changed";
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size()) return fmt::format("rank {} storage count changed", r);
    for (size_t s = 0; s < a[r].size(); ++s) {
      if (!(a[r][s] == b[r][s])) {
        return fmt::format("rank {} '{}' moved {:#x}/{} -> {:#x}/{}", r, a[r][s].name, a[r][s].address,
                           a[r][s].bytes, b[r][s].address, b[r][s].bytes);
      }
    }
  }
  return "";
}

struct StepStats {
  int inside = 0;               ///< decode steps that ended inside [begin, end]
  double median_interval = 0;   ///< median gap between consecutive decode steps, seconds
};

StepStats step_stats(const std::vector<ProbeSample>& samples, double begin, double end) {
  std::vector<double> times;
  for (const auto& s : samples) times.insert(times.end(), s.step_times.begin(), s.step_times.end());
  std::sort(times.begin(), times.end());
  StepStats stats;
  std::vector<double> gaps;
  for (size_t i = 0; i < times.size(); ++i) {
    if (times[i] >= begin && times[i] <= end) ++stats.inside;
    if (i > 0) gaps.push_back(times[i] - times[i - 1]);
  }
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    stats.median_interval = gaps[gaps.size() / 2];
  }
  return stats;
}

nlohmann::json phases_json(const std::vector<PhaseRecord>& records) {
  // Aggregate repeated records (per storage / per rank) under one name, keeping first-seen order.
  std::vector<std::string> order;
  std::map<std::string, PhaseRecord> sum;
  for (const auto& r : records) {
    auto [it, inserted] = sum.try_emplace(r.name, PhaseRecord{r.name, 0, 0, r.floor});
    if (inserted) order.push_back(r.name);
    it->second.seconds += r.seconds;
    it->second.bytes += r.bytes;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : order) {
    const auto& r = sum[name];
    out.push_back({{"name", r.name}, {"seconds", r.seconds}, {"bytes", r.bytes}, {"floor", floor_name(r.floor)}});
  }
  return out;
}

/// Offsets in seconds from the trial start (the fresh engine's boot) for the trace of `wsbench report trace`:
/// {native_load, prepare, commit, pause: {start_s, end_s}, first_target_s, decode_steps_s}. The pause's start is
/// estimated: the engine reports only its length, and the gate reopens just before commit returns, so the pause is
/// placed ending at the commit's end ("estimated": true). At most kMaxSteps decode steps are kept.
nlohmann::json timeline_json(double trial0, double native_load_s, double prepare0, double prepare1, double commit0,
                             double commit1, double pause_s, double first_target,
                             const std::vector<ProbeSample>& samples) {
  constexpr size_t kMaxSteps = 20000;
  auto rel = [trial0](double t) { return std::round((t - trial0) * 1e6) / 1e6; };  // microsecond resolution
  auto span = [&](double a, double b) { return nlohmann::json{{"start_s", rel(a)}, {"end_s", rel(b)}}; };
  nlohmann::json out{{"native_load", span(trial0, trial0 + native_load_s)}};
  if (prepare1 > 0) out["prepare"] = span(prepare0, prepare1);
  if (commit1 > 0) {
    out["commit"] = span(commit0, commit1);
    out["pause"] = span(std::max(commit0, commit1 - pause_s), commit1);
    out["pause"]["estimated"] = true;
  }
  if (first_target > 0) out["first_target_s"] = rel(first_target);
  std::vector<double> steps;
  for (const auto& s : samples) steps.insert(steps.end(), s.step_times.begin(), s.step_times.end());
  std::sort(steps.begin(), steps.end());
  if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);
  nlohmann::json rel_steps = nlohmann::json::array();
  for (double t : steps) rel_steps.push_back(rel(t));
  out["decode_steps_s"] = rel_steps;
  return out;
}

struct Reference {
  std::string fingerprint;
  Checksums checksums;
  double native_load_s = 0;
};

struct TrialInputs {
  const MatrixCell& cell;
  EngineLaunch launch;
  fs::path v0_dir;
  Reference target;
  std::string previous_v0_fingerprint;
  const ProgressFile& progress;
};

/// The body of one trial: boots `client` and fills `checks` and `trial`. Throws when the engine stops answering
/// (run_trial records that as a failed check).
void run_trial_body(int index, TrialInputs& in, Checks& checks, nlohmann::json& trial,
                    std::unique_ptr<EngineClient>& client_ptr) {
  const uint32_t target = in.cell.target;
  EngineLaunch launch = in.launch;
  launch.options.workdir = launch.options.workdir / fmt::format("trial-{}", index);
  std::error_code ec;
  fs::remove_all(launch.options.workdir, ec);
  fs::create_directories(launch.options.workdir);

  const auto report = [&](const char* phase) { in.progress.report(index, in.cell.n, phase); };
  report("boot");
  reset_peak_rss();
  const double boot0 = steady_seconds();
  client_ptr = start_engine(launch, in.v0_dir, 0);
  EngineClient& client = *client_ptr;
  const double native_load_s = steady_seconds() - boot0;
  trial["times_s"] = {{"native_load", native_load_s}};

  const std::string fp0 = fingerprint(client.generate(probe_request()));
  if (!in.previous_v0_fingerprint.empty()) {
    checks.add("fresh_engines_agree", fp0 == in.previous_v0_fingerprint,
               fmt::format("v0 fingerprint {} vs previous trial {}", fp0, in.previous_v0_fingerprint));
  }
  in.previous_v0_fingerprint = fp0;
  const auto pointers0 = client.storage_pointers();
  checks.add("update_changes_fingerprint", fp0 != in.target.fingerprint,
             fmt::format("v0 {} vs target {}", fp0, in.target.fingerprint));

  ProbeClient probe(client);
  probe.start();
  probe.wait_for_version(0, 30.0);
  // Memory peaks during prepare and during commit, sampled every 5 ms off the measured threads (devices only on
  // CUDA cells: a first cudaMemGetInfo would create a context on a CPU cell).
  MemorySampler prepare_sampler(std::chrono::milliseconds(5), in.cell.uses_cuda());
  MemorySampler commit_sampler(std::chrono::milliseconds(5), in.cell.uses_cuda());
  MemoryPeaks prepare_peaks, commit_peaks;
  bool commit_sampled = false;
  prepare_sampler.start();
  const double prepare0 = steady_seconds();
  PrepareReport prepare_report;
  CommitReport commit_report;
  double prepare1 = 0, commit0 = 0, commit1 = 0;
  std::string update_error;
  try {
    report("prepare");
    prepare_report = client.prepare(target);
    prepare1 = steady_seconds();
    prepare_peaks = prepare_sampler.stop();
    report("commit");
    commit_sampler.start();
    commit_sampled = true;
    commit0 = steady_seconds();
    commit_report = client.commit(target);
    commit1 = steady_seconds();
  } catch (const std::exception& e) {
    update_error = e.what();
  }
  if (prepare1 == 0) prepare_peaks = prepare_sampler.stop();
  if (commit_sampled) commit_peaks = commit_sampler.stop();
  double first_target = -1;
  if (update_error.empty()) probe.wait_for_version(target, 30.0, 3);
  probe.stop();
  report("verify");
  const auto samples = probe.samples();
  checks.add("update_succeeds", update_error.empty(), update_error.empty() ? "prepare and commit returned" : update_error);

  // Probe traffic, judged per response.
  int before = 0, during_prepare = 0, after = 0, errors = 0, wrong = 0, restarts = 0;
  std::string first_wrong;
  for (const auto& s : samples) {
    restarts += s.restarts;
    if (!s.error.empty()) {
      ++errors;
      if (first_wrong.empty()) first_wrong = "error: " + s.error;
      continue;
    }
    const bool ok = (s.version == 0 && s.fingerprint == fp0) ||
                    (s.version == target && s.fingerprint == in.target.fingerprint);
    if (!ok) {
      ++wrong;
      if (first_wrong.empty()) {
        first_wrong = fmt::format("response at version {} has fingerprint {}", version_string(s.version), s.fingerprint);
      }
    }
    if (prepare1 > 0 && s.received > prepare0 && s.received < prepare1) ++during_prepare;
    if (commit0 > 0 && s.received < commit0) {
      ++before;
      if (s.version != 0) {
        ++wrong;
        if (first_wrong.empty()) first_wrong = "a response before commit reported " + version_string(s.version);
      }
    }
    if (commit1 > 0 && s.sent > commit1) {
      ++after;
      if (s.version != target) {
        ++wrong;
        if (first_wrong.empty()) first_wrong = "a response after commit reported " + version_string(s.version);
      }
    }
    if (s.version == target && first_target < 0) first_target = s.received;
  }
  checks.add("probes_exact", errors == 0 && wrong == 0,
             first_wrong.empty() ? fmt::format("{} responses, each at one version with its exact fingerprint",
                                               samples.size())
                                 : first_wrong);
  // Generation must go on while prepare runs: decode steps inside the prepare window. A window shorter than
  // a few scheduler time slices (kKernelSliceS) or three decode steps cannot be required to contain one: on a
  // busy 2-core machine the kernel may run only prepare's threads for that long.
  constexpr double kKernelSliceS = 0.020;
  const auto steps = step_stats(samples, prepare0, prepare1);
  const bool generated = steps.inside > 0 || (prepare1 - prepare0) < std::max(kKernelSliceS, 3 * steps.median_interval);
  checks.add("generation_during_prepare", update_error.empty() && generated,
             fmt::format("{} decode steps and {} complete responses (all at v0) inside the {:.3g} s prepare; "
                         "median step {:.3g} s",
                         steps.inside, during_prepare, prepare1 - prepare0, steps.median_interval));
  checks.add("probes_after_commit", after > 0, fmt::format("{} responses sent after commit at the target", after));

  const uint32_t version = client.weight_version();
  checks.add("version_is_target", version == target,
             fmt::format("served {} expected {}", version_string(version), version_string(target)));
  const Checksums checksums1 = client.storage_checksums();
  const std::string diff = checksum_diff(checksums1, in.target.checksums);
  checks.add("checksums_equal_native_load", diff.empty(),
             diff.empty() ? fmt::format("{} ranks equal a fresh native load of {}", checksums1.size(),
                                        version_string(target))
                          : "differ: " + diff);
  if (pointers0.empty()) {
    checks.skip("storage_pointers_unchanged", "the engine reports no storage pointers (GET /wsbench/storage_pointers)");
  } else {
    const std::string moved = pointer_diff(pointers0, client.storage_pointers());
    checks.add("storage_pointers_unchanged", moved.empty(), moved.empty() ? "every storage kept address and size" : moved);
  }

  // A prepare of a version that was never published must be rejected and change nothing.
  const uint32_t missing = in.cell.publish_versions + 1000;
  std::string missing_detail;
  bool missing_ok = false;
  try {
    client.prepare(missing);
    missing_detail = fmt::format("prepare {} was accepted", version_string(missing));
  } catch (const Error& e) {
    // An engine whose rejections carry no kind (a fork without error_kind) cannot say "missing": any rejection counts.
    missing_ok = e.kind() == ErrorKind::Missing || (!client.reports_error_kinds() && e.kind() == ErrorKind::State);
    missing_detail = fmt::format("rejected ({}): {}", error_kind_name(e.kind()), e.what());
  }
  const std::string fp_after = fingerprint(client.generate(probe_request()));
  const bool unchanged = client.weight_version() == target && checksum_diff(client.storage_checksums(), checksums1).empty() &&
                         fp_after == in.target.fingerprint;
  checks.add("missing_target_rejected", missing_ok && unchanged,
             missing_ok && !unchanged ? "rejected but version/checksums/fingerprint changed" : missing_detail);

  nlohmann::json times{{"native_load", native_load_s}};
  if (update_error.empty()) {
    times["prepare"] = prepare_report.seconds;
    times["commit"] = commit1 - commit0;
    times["pause"] = commit_report.pause_seconds;
    if (first_target > 0) times["envelope"] = first_target - prepare0;
    times["max_stall"] = max_step_gap(samples);
    if (commit_report.cupti_overhead_seconds > 0) times["cupti_overhead"] = commit_report.cupti_overhead_seconds;
  }
  std::vector<PhaseRecord> phases = client.boot_phases();
  phases.insert(phases.end(), prepare_report.phases.begin(), prepare_report.phases.end());
  phases.insert(phases.end(), commit_report.phases.begin(), commit_report.phases.end());
  trial["times_s"] = times;
  trial["phases"] = phases_json(phases);
  if (in.cell.uses_cuda()) trial["cupti"] = cupti_json(commit_report.cupti);
  trial["memory"] = memory_snapshot();
  trial["memory"]["prepare_peak"] = memory_peaks_json(prepare_peaks, prepare_sampler.period());
  if (commit_sampled) trial["memory"]["commit_peak"] = memory_peaks_json(commit_peaks, commit_sampler.period());
  // gVisor reports no VmHWM (0): the peak is then the sampled one, and says so.
  if (trial["memory"].value("rss_peak_bytes", uint64_t{0}) == 0) {
    trial["memory"]["rss_peak_bytes"] = std::max(prepare_peaks.rss_peak_bytes, commit_peaks.rss_peak_bytes);
    trial["memory"]["rss_peak_source"] = "sampled during prepare and commit (VmHWM unavailable)";
  }
  trial["timeline"] = timeline_json(boot0, native_load_s, prepare0, prepare1, commit0, commit1,
                                    commit_report.pause_seconds, first_target, samples);
  if (const auto mode_memory = client.mode_memory()) {
    trial["memory"]["mode_canonical_bytes"] = mode_memory->canonical_bytes;
    trial["memory"]["mode_rank_image_bytes"] = mode_memory->rank_image_bytes;
    trial["memory"]["mode_staging_bytes"] = mode_memory->staging_bytes;
  }
  if (in.cell.uses_http()) trial["memory"]["process"] = "the profiler's (the client); the engine runs in its server";
  trial["probe"] = {{"responses", samples.size()}, {"before_commit", before},
                    {"during_prepare", during_prepare}, {"after_commit", after},
                    {"errors", errors}, {"restarted_by_commit", restarts}};
}

nlohmann::json run_trial(int index, TrialInputs& in) {
  Checks checks;
  nlohmann::json trial{{"index", index}, {"times_s", nlohmann::json::object()}};
  std::unique_ptr<EngineClient> client;
  try {
    run_trial_body(index, in, checks, trial, client);
  } catch (const std::exception& e) {
    checks.add("engine_answers", false, e.what());
  }
  if (client) {
    nlohmann::json server = client->shutdown();
    if (!server.is_null()) {
      if (checks.passed()) server.erase("log_tail");
      trial["server"] = std::move(server);
    }
  }
  trial["status"] = checks.passed() ? "pass" : "fail";
  trial["reason"] = checks.reason();
  trial["checks"] = checks.json();
  return trial;
}

}  // namespace

nlohmann::json run_cell(const MatrixCell& cell, const CellRunOptions& options) {
  nlohmann::json out = cell.to_json();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  out["host"] = host;
  out["trials"] = nlohmann::json::array();
  const std::string detected = detect_host_runtime();
  out["runtime_detected"] = detected;
  const ProgressFile progress(options.progress_file);
  fs::path own_store;  // a cell-given store the cell published into
  try {
    // A cell labelled gVisor that is not inside a sandbox would report another runtime's numbers under its name.
    if (cell.runtime == "gvisor" && detected != "gvisor" && !cell.uses_http()) {
      throw Error(ErrorKind::State, fmt::format("runtime 'gvisor' but the cell process runs on '{}' (no gVisor sandbox)",
                                                detected));
    }
    progress.report(-1, cell.n, "publish");
    std::error_code ec;
    fs::remove_all(options.workdir, ec);
    fs::create_directories(options.workdir);
    ModelProfile profile = find_profile(cell.model, options.profiles_dir);
    if (cell.scaled()) profile = scale_profile(profile, cell.scale());

    const fs::path store_dir = cell.store.empty() ? options.workdir / "store" : fs::path(cell.store);
    if (!cell.store.empty() && fs::exists(store_dir) && !fs::is_empty(store_dir)) {
      throw Error(ErrorKind::State, fmt::format("store '{}' is not empty (the cell publishes into it)", cell.store));
    }
    own_store = cell.store.empty() ? fs::path() : store_dir;
    PublishOptions publish_options;
    publish_options.store = store_dir;
    publish_options.first_version = 0;
    publish_options.last_version = cell.publish_versions;
    publish_options.seed = cell.seed;
    publish_options.density = cell.density;
    publish_options.encoding = *parse_delta_encoding(cell.encoding);
    publish_options.threads = cell.prepare_threads;
    const auto published = publish(profile, publish_options);
    nlohmann::json publications = nlohmann::json::array();
    for (const auto& p : published) {
      publications.push_back({{"version", p.version}, {"full", p.full}, {"canonical_bytes", p.canonical_bytes},
                              {"stored_bytes", p.stored_bytes}, {"changed_values", p.changed_values},
                              {"seconds", p.seconds}});
    }
    out["publications"] = publications;

    // The reference is independent of every sync mode: the publisher's own FULL checkpoint of the target.
    progress.report(-1, cell.n, "reference");
    const fs::path reference_dir = options.workdir / "reference";
    write_full_checkpoint(profile, cell.seed, cell.target, cell.density, reference_dir, 2ull << 30,
                          cell.prepare_threads);

    progress.report(-1, cell.n, "floors");
    FloorMeasurement floors = measure_floors(options.workdir, cell.floor_bytes, cell.prepare_threads);
    if (cell.uses_cuda()) add_h2d_floors(floors, cell.tp, cell.copy_streams);
    out["floors"] = floors_json(floors);

    EngineLaunch launch{EngineOptions{profile, cell.tp, cell.sync, store_dir, options.workdir, cell.prepare_threads}};
    if (cell.uses_cuda()) {
      launch.options.backend = "cuda";
      launch.options.device.chunk_bytes = cell.chunk_bytes;
      launch.options.device.streams_per_rank = cell.copy_streams;
      launch.options.cupti = cell.cupti;
    }
    if (cell.uses_http()) {
      launch.engine = "http";
      launch.layers = cell.layers;
      launch.experts = cell.experts;
      launch.server.command = cell.server_command;
      launch.server.launcher = options.launcher;
      launch.server.ready_timeout_s = cell.server_ready_timeout_s;
      launch.server.stop_timeout_s = cell.server_stop_timeout_s;
      launch.server.request_timeout_s = cell.server_request_timeout_s;
      launch.server.self = options.self.empty() ? fs::read_symlink("/proc/self/exe") : options.self;
      launch.server.profiles_dir = options.profiles_dir;
    }
    Reference reference;
    {
      progress.report(-1, cell.n, "reference engine");
      EngineLaunch ref_launch = launch;
      ref_launch.options.workdir = options.workdir / "reference-engine";
      ref_launch.options.sync.cpu = CpuSyncOptions{};  // it only loads natively: no second image set
      const double t0 = steady_seconds();
      std::unique_ptr<EngineClient> native;
      try {
        native = start_engine(ref_launch, reference_dir, cell.target);
        reference.native_load_s = steady_seconds() - t0;
        reference.fingerprint = fingerprint(native->generate(probe_request()));
        reference.checksums = native->storage_checksums();
      } catch (const std::exception& e) {
        throw Error(ErrorKind::State, fmt::format("reference engine (native load of {}): {}", version_string(cell.target),
                                                  e.what()));
      }
      out["bytes"] = {{"canonical", profile.canonical_bytes()}};
      if (const auto pointers = native->storage_pointers(); !pointers.empty()) {
        nlohmann::json per_rank = nlohmann::json::array();
        for (const auto& rank : pointers) {
          uint64_t bytes = 0;
          for (const auto& storage : rank) bytes += storage.bytes;
          per_rank.push_back(bytes);
        }
        out["bytes"]["rank_image_per_rank"] = per_rank;
      }
      if (nlohmann::json server = native->shutdown(); !server.is_null()) {
        server.erase("log_tail");
        out["reference_server"] = std::move(server);
      }
      for (const auto& p : published) {
        if (p.version == cell.target) out["bytes"]["delta_compressed"] = p.stored_bytes;
      }
    }
    // The native load's per-rank checksum maps travel with the results, so two runs (hosts, builds) can be compared
    // storage by storage.
    out["reference"] = {{"fingerprint", reference.fingerprint},
                        {"native_load_s", reference.native_load_s},
                        {"checksums", reference.checksums}};

    TrialInputs inputs{cell, launch, Store(store_dir).update_dir(0), reference, "", progress};
    std::string first_failure;
    for (int i = 0; i < cell.n; ++i) {
      nlohmann::json trial = run_trial(i, inputs);
      if (trial["status"] != "pass" && first_failure.empty()) {
        first_failure = fmt::format("trial {}: {}", i, trial["reason"].get<std::string>());
      }
      out["trials"].push_back(std::move(trial));
    }
    progress.report(cell.n - 1, cell.n, "done");
    out["status"] = first_failure.empty() ? "pass" : "fail";
    out["reason"] = first_failure;
  } catch (const std::exception& e) {
    out["status"] = "fail";
    out["reason"] = fmt::format("setup: {}", e.what());
  }
  if (!options.keep_workdir) {
    std::error_code ec;
    fs::remove_all(options.workdir, ec);
    if (!own_store.empty()) fs::remove_all(own_store, ec);
  }
  return out;
}

}  // namespace wsb
