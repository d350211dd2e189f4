#include "harness/profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "harness/context.hpp"
#include "harness/physics.hpp"
#include "harness/probe.hpp"
#include "harness/trial.hpp"
#include "publication/store.hpp"
#include "harness/publication_record.hpp"
#include "publisher/checkpoint_publisher.hpp"
#include "publisher/publisher.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

/// The cell's configuration as results record it: the typed fields of Cell, the rest of MatrixCell::to_json in
/// `extra`.
Cell cell_record(const MatrixCell& mc) {
  Cell c;
  c.id = mc.id;
  c.model = mc.model;
  c.sync = mc.sync;
  c.runtime = mc.runtime;
  c.engine = mc.engine;
  c.protocol = mc.effective_protocol();
  c.pause_mode = mc.pause_mode;
  c.tp = mc.tp;
  c.n = mc.n;
  c.extra = mc.to_json();
  for (const char* typed : {"id", "model", "runtime", "engine", "tp", "n", "protocol", "pause_mode"}) c.extra.erase(typed);
  for (const std::string& key : sync_field_names()) c.extra.erase(key);
  return c;
}

/// Stage "publish": FULL v0 and DELTA v1..publish_versions into `store_dir`: the cell's profile synthesized (or its
/// checkpoint's weights) perturbed version by version, or, for a cell naming `checkpoints`, the real consecutive
/// checkpoints.
std::vector<PublicationStats> publish_stage(const MatrixCell& cell, const ModelProfile& profile,
                                            const fs::path& store_dir, Cell& out) {
  std::vector<PublicationStats> published;
  if (!cell.checkpoints.empty()) {
    CheckpointPublishOptions options;
    options.store = store_dir;
    options.encoding = parse_delta_encoding(cell.encoding);  // nullopt for "auto"
    options.threads = cell.prepare_threads;
    std::vector<fs::path> dirs{cell.checkpoint};
    dirs.insert(dirs.end(), cell.checkpoints.begin(), cell.checkpoints.end());
    published = publish_from_checkpoints(dirs, options);
  } else {
    PublishOptions publish_options;
    publish_options.store = store_dir;
    publish_options.first_version = 0;
    publish_options.last_version = cell.publish_versions;
    publish_options.seed = cell.seed;
    publish_options.density = cell.density;
    publish_options.encoding = *parse_delta_encoding(cell.encoding);
    publish_options.frame_bytes = cell.frame_bytes;
    publish_options.checksum_range_bytes = cell.checksum_range_bytes;
    publish_options.threads = cell.prepare_threads;
    publish_options.initial_checkpoint = cell.checkpoint;
    published = publish(profile, publish_options);
  }
  nlohmann::json publications = nlohmann::json::array();
  for (const auto& p : published) publications.push_back(publication_json(p));
  out.extra["publications"] = publications;
  return published;
}

/// Stage "floors": host memcpy and disk read under the workdir, and pinned H2D on CUDA cells.
void floors_stage(const MatrixCell& cell, const fs::path& workdir, Cell& out) {
  FloorMeasurement floors = measure_floors(workdir, cell.floor_bytes, cell.prepare_threads);
  if (cell.uses_cuda()) add_h2d_floors(floors, cell.tp, cell.copy_streams);
  out.floors = floors_record(floors);
}

/// How every engine of the cell is booted: the embedded engine's options, or the server command of an http cell.
EngineLaunch launch_of(const MatrixCell& cell, const ModelProfile& profile, const fs::path& store_dir,
                       const CellRunOptions& options) {
  EngineLaunch launch{EngineOptions{profile, cell.tp, cell.sync, store_dir, options.workdir, cell.prepare_threads}};
  launch.pause_mode = cell.pause_mode;
  if (cell.uses_cuda()) {
    launch.options.backend = "cuda";
    launch.options.device.chunk_bytes = cell.chunk_bytes;
    launch.options.device.copy_streams = cell.copy_streams;
    launch.options.cupti = cell.cupti;
  }
  if (cell.uses_http()) {
    launch.engine = "http";
    launch.protocol = cell.effective_protocol();
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
  return launch;
}

/// Stage "reference": the publisher's own FULL checkpoint of the target (independent of every sync mode), loaded
/// natively by a fresh engine: its probe fingerprint and per-rank checksums are what every update must equal.
Reference reference_stage(const MatrixCell& cell, const ModelProfile& profile, const EngineLaunch& launch,
                          const std::vector<PublicationStats>& published, const CellRunOptions& options,
                          const ProgressFile& progress, Cell& out) {
  progress.report(-1, cell.n, "reference");
  // Real consecutive checkpoints: the target is one of them, loaded as it is. Otherwise the publisher writes it.
  fs::path reference_dir = options.workdir / "reference";
  if (!cell.checkpoints.empty()) {
    reference_dir = cell.checkpoints[cell.target - 1];
  } else {
    write_full_checkpoint(profile, cell.seed, cell.target, cell.density, reference_dir, 2ull << 30,
                          cell.prepare_threads, cell.checkpoint);
  }
  progress.report(-1, cell.n, "reference engine");
  EngineLaunch ref_launch = launch;
  ref_launch.options.workdir = options.workdir / "reference-engine";
  ref_launch.options.sync.cpu = CpuSyncOptions{};  // it only loads natively: no second image set
  Reference reference;
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
  Bytes bytes;
  bytes.canonical = profile.canonical_bytes();
  for (const auto& rank : native->storage_pointers()) {
    uint64_t rank_bytes = 0;
    for (const auto& storage : rank) rank_bytes += storage.bytes;
    bytes.rank_image_per_rank.push_back(rank_bytes);
  }
  for (const auto& p : published) {
    if (p.version == cell.target) bytes.delta_compressed = p.stored_bytes;
  }
  out.bytes = bytes;
  if (nlohmann::json server = native->shutdown(); !server.is_null()) {
    server.erase("log_tail");
    out.extra["reference_server"] = std::move(server);
  }
  // The native load's per-rank checksum maps travel with the results, so two runs (hosts, builds) can be compared
  // storage by storage.
  out.extra["reference"] = {{"fingerprint", reference.fingerprint},
                            {"native_load_s", reference.native_load_s},
                            {"checksums", reference.checksums}};
  return reference;
}

}  // namespace

Cell run_cell(const MatrixCell& cell, const CellRunOptions& options) {
  Cell out = cell_record(cell);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  out.host = host;
  const std::string detected = detect_host_runtime();
  out.extra["runtime_detected"] = detected;
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
    const ModelProfile profile = cell_profile(cell, options.profiles_dir);
    const fs::path store_dir = cell.store.empty() ? options.workdir / "store" : fs::path(cell.store);
    if (!cell.store.empty() && fs::exists(store_dir) && !fs::is_empty(store_dir)) {
      throw Error(ErrorKind::State, fmt::format("store '{}' is not empty (the cell publishes into it)", cell.store));
    }
    own_store = cell.store.empty() ? fs::path() : store_dir;
    const auto published = publish_stage(cell, profile, store_dir, out);
    const EngineLaunch launch = launch_of(cell, profile, store_dir, options);
    const Reference reference = reference_stage(cell, profile, launch, published, options, progress, out);
    progress.report(-1, cell.n, "floors");
    floors_stage(cell, options.workdir, out);

    const TrialSetup setup{cell, launch, Store(store_dir).update_dir(0), reference, progress, options.keep_workdir};
    std::string previous_fp;
    for (int i = 0; i < cell.n; ++i) {
      Trial trial = run_trial(i, setup, previous_fp);
      if (trial.status != Status::Pass && out.reason.empty()) out.reason = fmt::format("trial {}: {}", i, trial.reason);
      out.trials.push_back(std::move(trial));
    }
    progress.report(cell.n - 1, cell.n, "done");
    out.status = out.reason.empty() ? Status::Pass : Status::Fail;
  } catch (const std::exception& e) {
    out.status = Status::Fail;
    out.reason = fmt::format("setup: {}", e.what());
  }
  if (!options.keep_workdir) {
    std::error_code ec;
    fs::remove_all(options.workdir, ec);
    if (!own_store.empty()) fs::remove_all(own_store, ec);
  }
  return out;
}

}  // namespace wsb
