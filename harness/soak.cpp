#include "harness/soak.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "engine/engine.hpp"
#include "harness/memory_sampler.hpp"
#include "harness/process_resources.hpp"
#include "harness/soak_publisher.hpp"
#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "publisher/publisher.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

using Checksums = std::vector<std::map<std::string, std::string>>;

/// What an engine serves: version, every rank's storage checksums, the fingerprint of one greedy probe.
struct Served {
  uint32_t version = 0;
  Checksums checksums;
  std::string fingerprint;
};

Served served(Engine& engine) {
  GenerateRequest request;
  request.input_ids = tokenize_bytes("soak probe");
  request.max_new_tokens = 6;
  const std::string fp = fingerprint(engine.generate(request));
  return {engine.weight_version(), engine.storage_checksums(), fp};
}

/// "" when equal, else the first storage that differs ("rank 1 'model.layers.0.mlp.down_proj.weight'").
std::string first_difference(const Checksums& a, const Checksums& b) {
  if (a.size() != b.size()) return fmt::format("{} ranks vs {}", a.size(), b.size());
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r] == b[r]) continue;
    for (const auto& [name, hash] : a[r]) {
      auto it = b[r].find(name);
      if (it == b[r].end() || it->second != hash) return fmt::format("rank {} '{}'", r, name);
    }
    return fmt::format("rank {} storage set", r);
  }
  return "";
}

/// "" when the update did what its delta says, else what it did instead.
std::string judge(const Served& now, const Served& before, bool identity, uint32_t target) {
  if (now.version != target) {
    return fmt::format("served {} after the commit of {}", version_string(now.version), version_string(target));
  }
  const std::string diff = first_difference(now.checksums, before.checksums);
  if (identity && !diff.empty()) return "the identity update changed storage " + diff;
  if (identity && now.fingerprint != before.fingerprint) return "the identity update changed the fingerprint";
  if (!identity && diff.empty()) return "the real update left every storage unchanged";
  if (!identity && now.fingerprint == before.fingerprint) return "the real update left the fingerprint unchanged";
  return "";
}

/// "" when `a` (of `what`) serves exactly what `b` does.
std::string compare(const Served& a, const Served& b, const std::string& what) {
  if (a.version != b.version) {
    return fmt::format("{}: version {} vs {}", what, version_string(a.version), version_string(b.version));
  }
  if (const std::string diff = first_difference(a.checksums, b.checksums); !diff.empty()) {
    return fmt::format("{}: storage {} differs", what, diff);
  }
  if (a.fingerprint != b.fingerprint) return fmt::format("{}: fingerprint {} vs {}", what, a.fingerprint, b.fingerprint);
  return "";
}

void take_readings(SoakCycle& c, const fs::path& workdir) {
  c.rss_bytes = resident_bytes().value_or(0);
  c.page_cache_bytes = page_cache_bytes(workdir);
  c.host_page_cache_bytes = host_page_cache_bytes();
  c.open_fds = open_fd_count();
}

/// The cycle pattern repeats every 4 cycles (disk real, cpu real, disk identity, cpu identity): only readings one
/// period apart see the same publications in the store and the same mode's transient, so only those are compared.
constexpr int kPeriod = 4;

void check_options(const SoakOptions& o) {
  if (o.warmup < 0) throw Error(ErrorKind::Format, fmt::format("--warmup {} must be >= 0", o.warmup));
  if (o.cycles < o.warmup + kPeriod) {
    throw Error(ErrorKind::Format,
                fmt::format("--cycles {} must exceed --warmup {} by at least {} (one period: disk real, cpu real, disk "
                            "identity, cpu identity)",
                            o.cycles, o.warmup, kPeriod));
  }
  if (!(o.max_deviation >= 0) || !std::isfinite(o.max_deviation)) {
    throw Error(ErrorKind::Format, fmt::format("--max-deviation {} must be a non-negative fraction", o.max_deviation));
  }
  if (o.workdir.empty()) throw Error(ErrorKind::Format, "soak: workdir is empty");
}

std::vector<SoakFigure> figures_of(const SoakResult& r) {
  // Settled readings once per period, ending with the last cycle and starting at the first in step with it from the
  // state entering the window on (the last warm-up cycle's readings; -1 is the boot's).
  const int last = static_cast<int>(r.cycles_run.size()) - 1;
  std::vector<const SoakCycle*> settled;
  for (int i = r.warmup - 1 + (last - (r.warmup - 1)) % kPeriod; i <= last; i += kPeriod) {
    settled.push_back(i < 0 ? &r.boot : &r.cycles_run[static_cast<size_t>(i)]);
  }
  std::map<std::string, std::vector<double>> peaks;
  for (size_t i = static_cast<size_t>(r.warmup); i < r.cycles_run.size(); ++i) {
    peaks[r.cycles_run[i].mode].push_back(static_cast<double>(r.cycles_run[i].rss_peak_bytes));
  }
  auto series = [&](auto field) {
    std::vector<double> out;
    for (const SoakCycle* c : settled) out.push_back(static_cast<double>(field(*c)));
    return out;
  };
  std::vector<SoakFigure> out;
  out.push_back(flatness("RSS", "bytes", series([](const SoakCycle& c) { return c.rss_bytes; })));
  for (const char* mode : {"disk", "cpu"}) {
    if (peaks[mode].empty()) continue;
    // Shown, not judged: the sampler catches each cycle's transient (mapped checkpoint pages, staged payloads) at a
    // different moment, so one cycle's peak is not a level; a leak shows in the settled RSS above.
    SoakFigure peak = flatness(fmt::format("RSS peak, {} cycles", mode), "bytes", peaks[mode]);
    peak.judged = false;
    peak.note = "not judged: a 5 ms sample of a transient";
    out.push_back(peak);
  }
  out.push_back(flatness("page cache, soak files", "bytes", series([](const SoakCycle& c) { return c.page_cache_bytes; })));
  out.push_back(flatness("open file descriptors", "fds", series([](const SoakCycle& c) { return c.open_fds; })));
  if (std::all_of(settled.begin(), settled.end(), [](const SoakCycle* c) { return c->host_page_cache_bytes.has_value(); })) {
    SoakFigure host = flatness("page cache, host", "bytes",
                               series([](const SoakCycle& c) { return *c.host_page_cache_bytes; }));
    host.judged = false;
    host.note = "not judged: every process on the host adds to it";
    out.push_back(host);
  }
  return out;
}

}  // namespace

SoakFigure flatness(std::string resource, std::string unit, const std::vector<double>& samples) {
  if (samples.empty()) throw std::invalid_argument("flatness of '" + resource + "': no samples");
  SoakFigure f{std::move(resource), std::move(unit), samples.front(), samples.back(), 0, true, ""};
  for (double x : samples) {
    const double deviation = f.start != 0 ? std::fabs(x - f.start) / f.start : (x != 0 ? 1.0 : 0.0);
    f.max_deviation = std::max(f.max_deviation, deviation);
  }
  return f;
}

bool SoakResult::passed() const {
  if (static_cast<int>(cycles_run.size()) != cycles || exact_updates() != cycles_run.size()) return false;
  if (!reference_failure.empty()) return false;
  return std::all_of(figures.begin(), figures.end(),
                     [&](const SoakFigure& f) { return !f.judged || f.max_deviation <= max_deviation; });
}

size_t SoakResult::exact_updates() const {
  return static_cast<size_t>(
      std::count_if(cycles_run.begin(), cycles_run.end(), [](const SoakCycle& c) { return c.failure.empty(); }));
}

SoakResult run_soak(const SoakOptions& o) {
  check_options(o);
  SoakResult result;
  result.model = o.profile.id;
  result.tp = o.tp;
  result.cycles = o.cycles;
  result.warmup = o.warmup;
  result.max_deviation = o.max_deviation;
  std::error_code ec;
  if (fs::exists(o.workdir, ec) && !fs::is_empty(o.workdir, ec)) {
    throw Error(ErrorKind::State, fmt::format("soak workdir '{}' is not empty (the soak writes its store and engine "
                                              "workdirs there)", o.workdir.string()));
  }
  fs::create_directories(o.workdir);
  const fs::path store = o.workdir / "store";
  SoakPublisher publisher(o.profile, store, o.seed, o.encoding);
  Engine disk(EngineOptions{o.profile, o.tp, {SyncModeKind::Disk}, store, o.workdir / "disk", o.prepare_threads});
  Engine cpu(EngineOptions{o.profile, o.tp, {SyncModeKind::Cpu}, store, o.workdir / "cpu", o.prepare_threads});
  disk.load_native(Store(store).update_dir(0), 0);
  cpu.load_native(Store(store).update_dir(0), 0);
  std::map<std::string, Served> last{{"disk", served(disk)}, {"cpu", served(cpu)}};
  MemorySampler sampler(std::chrono::milliseconds(5));
  // Every cycle's record exists (and its memory is touched) before the first reading: the soak's own bookkeeping
  // growing cycle by cycle would otherwise be the RSS growth it reports (a vector doubling at 128, 256, 512 cycles).
  result.cycles_run.resize(static_cast<size_t>(o.cycles));
  size_t ran = 0;
  result.boot.mode = "boot";
  take_readings(result.boot, o.workdir);

  for (int i = 0; i < o.cycles; ++i) {
    // disk, cpu, disk, cpu, ...: each publication is applied by the disk engine, then by the cpu engine; every
    // second publication is an identity, so each mode alternates real and identity updates.
    const bool disk_turn = i % 2 == 0;
    SoakCycle c;
    c.index = i;
    c.mode = disk_turn ? "disk" : "cpu";
    c.identity = (i / 2) % 2 == 1;
    Engine& engine = disk_turn ? disk : cpu;
    if (disk_turn) publisher.publish_next(c.identity);
    c.version = publisher.version();
    sampler.start();
    try {
      const double t0 = steady_seconds();
      engine.prepare(c.version);
      const double t1 = steady_seconds();
      engine.commit(c.version);
      c.prepare_s = t1 - t0;
      c.commit_s = steady_seconds() - t1;
    } catch (const std::exception& e) {
      c.failure = fmt::format("update to {} failed: {}", version_string(c.version), e.what());
    }
    c.rss_peak_bytes = sampler.stop().rss_peak_bytes;
    if (c.failure.empty()) {
      const Served now = served(engine);
      c.failure = judge(now, last[c.mode], c.identity, c.version);
      if (c.failure.empty() && !disk_turn) c.failure = compare(now, last["disk"], "cpu engine vs disk engine");
      last[c.mode] = now;
    }
    // Both engines are at the newest version after a cpu cycle: nothing needs the older publications any more.
    if (!disk_turn) publisher.prune_before(c.version);
    engine.settle();  // the readings are of an engine between updates, not of one still cleaning up after one
    take_readings(c, o.workdir);
    result.cycles_run[ran++] = c;
    if (o.on_cycle) o.on_cycle(i + 1, o.cycles);
    if (!c.failure.empty()) break;
  }
  result.cycles_run.resize(ran);

  if (result.exact_updates() == result.cycles_run.size()) {
    // The reference: a fresh engine natively loaded from the synthetic FULL checkpoint of the content reached.
    const fs::path reference_dir = o.workdir / "reference";
    write_full_checkpoint(o.profile, o.seed, publisher.real_steps(), std::nullopt, reference_dir, 2ull << 30,
                          o.prepare_threads);
    Engine native(EngineOptions{o.profile, o.tp, SyncOptions{SyncModeKind::Cpu}, store, o.workdir / "reference-engine",
                                o.prepare_threads});
    native.load_native(reference_dir, publisher.version());
    const Served reference = served(native);
    result.reference_failure = compare(served(disk), reference, "disk engine vs native load");
    if (result.reference_failure.empty() && cpu.weight_version() == publisher.version()) {
      result.reference_failure = compare(served(cpu), reference, "cpu engine vs native load");
    }
  }
  if (static_cast<int>(result.cycles_run.size()) > o.warmup) result.figures = figures_of(result);
  return result;
}

Table soak_table(const SoakResult& r) {
  Table t;
  t.columns = {{"resource", MetricKind::Text},    {"unit", MetricKind::Text},   {"start", MetricKind::Raw},
               {"end", MetricKind::Raw},          {"max deviation", MetricKind::Percent},
               {"limit", MetricKind::Percent},    {"verdict", MetricKind::Text}};
  for (const SoakFigure& f : r.figures) {
    const std::string verdict = !f.judged ? f.note : f.max_deviation <= r.max_deviation ? "flat" : "NOT FLAT";
    t.rows.push_back({f.resource, f.unit, f.start, f.end, 100 * f.max_deviation,
                      f.judged ? Value(100 * r.max_deviation) : Value(), verdict});
  }
  return t;
}

Table soak_timing_table(const SoakResult& r) {
  Table t;
  t.columns = {{"mode", MetricKind::Text},
               {"updates", MetricKind::Count},
               {"identity", MetricKind::Count},
               {"prepare", MetricKind::DurationRange},
               {"commit", MetricKind::DurationRange}};
  for (const char* mode : {"disk", "cpu"}) {
    std::vector<const SoakCycle*> of;
    for (const auto& c : r.cycles_run) {
      if (c.mode == mode && c.failure.empty()) of.push_back(&c);
    }
    if (of.empty()) continue;
    Range prepare{of[0]->prepare_s, of[0]->prepare_s}, commit{of[0]->commit_s, of[0]->commit_s};
    double identity = 0;
    for (const SoakCycle* c : of) {
      prepare = {std::min(prepare.min, c->prepare_s), std::max(prepare.max, c->prepare_s)};
      commit = {std::min(commit.min, c->commit_s), std::max(commit.max, c->commit_s)};
      identity += c->identity;
    }
    t.rows.push_back({mode, static_cast<double>(of.size()), identity, prepare, commit});
  }
  return t;
}

nlohmann::json soak_json(const SoakResult& r) {
  auto cycle_json = [](const SoakCycle& c) {
    nlohmann::json j{{"index", c.index},          {"mode", c.mode},
                     {"identity", c.identity},    {"version", c.version},
                     {"prepare_s", c.prepare_s},  {"commit_s", c.commit_s},
                     {"rss_bytes", c.rss_bytes},  {"rss_peak_bytes", c.rss_peak_bytes},
                     {"page_cache_bytes", c.page_cache_bytes}, {"open_fds", c.open_fds},
                     {"failure", c.failure}};
    if (c.host_page_cache_bytes) j["host_page_cache_bytes"] = *c.host_page_cache_bytes;
    return j;
  };
  nlohmann::json cycles = nlohmann::json::array();
  for (const auto& c : r.cycles_run) cycles.push_back(cycle_json(c));
  nlohmann::json figures = nlohmann::json::array();
  for (const auto& f : r.figures) {
    figures.push_back({{"resource", f.resource}, {"unit", f.unit}, {"start", f.start}, {"end", f.end},
                       {"max_deviation", f.max_deviation}, {"judged", f.judged}, {"note", f.note}});
  }
  return {{"model", r.model},
          {"tp", r.tp},
          {"cycles", r.cycles},
          {"warmup", r.warmup},
          {"max_deviation", r.max_deviation},
          {"boot", cycle_json(r.boot)},
          {"cycles_run", cycles},
          {"figures", figures},
          {"exact_updates", r.exact_updates()},
          {"reference_failure", r.reference_failure},
          {"passed", r.passed()}};
}

}  // namespace wsb
