#include "engine/engine.hpp"

#include "engine/cuda/cuda_ipc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cuda/pinned.hpp"
#include "engine/device_transform_target.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "modes/registry/mode_registry.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/storage_loader.hpp"

namespace wsb {

/// One request in flight. Owned by the scheduler while active.
struct Engine::Active {
  GenerateRequest request;
  std::promise<GenerateResponse> promise;
  std::unique_ptr<SequenceState> sequence;
  size_t fed = 0;  // prompt tokens fed so far
  GenerateResponse response;
  uint32_t version = 0;
  std::vector<float> logits;
};

namespace {

std::vector<RankLayout> layouts_for(const EngineOptions& options) {
  if (options.tp < 1) throw Error(ErrorKind::Format, fmt::format("tp must be >= 1, got {}", options.tp));
  return build_rank_layouts(options.profile, options.tp);
}

}  // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)), layouts_(layouts_for(options_)) {
  if (options_.backend == "cpu") {
    auto host = std::make_unique<HostStorages>(layouts_);
    std::vector<RankStorageView> views(layouts_.size());
    for (size_t r = 0; r < layouts_.size(); ++r) {
      for (size_t s = 0; s < layouts_[r].storages.size(); ++s) {
        views[r].storages.push_back(host->storage(static_cast<int>(r), s));
      }
    }
    forward_ = make_forward(options_.profile, layouts_, views);
    if (options_.sync.mode == SyncModeKind::Cpu && options_.sync.cpu.commit_strategy == CommitStrategy::DeviceDelta) {
      uint64_t bytes = options_.sync.cpu.delta_staging_bytes;
      if (bytes == 0) {
        for (const auto& layout : layouts_) bytes += layout.bytes() / 4;
      }
      host->set_delta_staging_bytes(std::max<uint64_t>(bytes, 1 << 20));
    }
    host_storages_ = host.get();
    storages_ = std::move(host);
  } else if (options_.backend == "cuda") {
    DeviceStorageOptions device_options = options_.device;
    device_options.delta_staging_bytes = options_.sync.cpu.delta_staging_bytes;
    auto device = make_device_storages(layouts_, device_options);
    forward_ = make_device_forward(options_.profile, layouts_, device->views(), options_.forward);
    if (DeviceTransformTarget::needed(layouts_)) {
      device_transforms_ = std::make_unique<DeviceTransformTarget>(*device, layouts_);
    }
    storages_ = std::move(device);
    pinner_ = &cuda_host_pinner();
  } else {
    throw Error(ErrorKind::Format,
                fmt::format("engine backend '{}' is unknown (expected \"cpu\" or \"cuda\")", options_.backend));
  }
  SyncContext context{options_.profile, layouts_, options_.store, options_.workdir, options_.prepare_threads};
  context.pinner = pinner_;
  context.sync = options_.sync;
  if (options_.backend == "cuda") {
    context.device_ipc = &cuda_device_ipc();
    const auto& device = static_cast<const DeviceStorages&>(*storages_);
    for (size_t r = 0; r < layouts_.size(); ++r) context.rank_devices.push_back(device.device_of(static_cast<int>(r)));
  } else if (options_.refit_device_ipc != nullptr) {
    context.rank_devices.assign(layouts_.size(), 0);
  }
  if (options_.refit_device_ipc != nullptr) context.device_ipc = options_.refit_device_ipc;
  context.fault_hook = options_.fault_hook;
  context.live = device_transforms_ ? static_cast<StorageTarget*>(device_transforms_.get()) : storages_.get();
  mode_ = make_sync_mode(std::move(context));
  state_ = std::make_unique<SyncStateMachine>(0);
  scheduler_ = std::thread([this] { scheduler_loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  scheduler_.join();
  fail_all("engine shut down");
}

uint64_t Engine::storage_bytes() const {
  uint64_t total = 0;
  for (const auto& layout : layouts_) total += layout.bytes();
  return total;
}

LoadReport Engine::load_native(const std::filesystem::path& checkpoint_dir, uint32_t version) {
  std::lock_guard control(control_mu_);
  if (loaded_) throw Error(ErrorKind::State, "native load: the engine is already loaded (boot once, before serving)");
  PhaseLog log;
  const double start = steady_seconds();
  LoadReport report;
  CheckpointReader checkpoint(checkpoint_dir);
  for (const auto& spec : options_.profile.canonical_tensors()) {
    expect_tensor(checkpoint, spec, checkpoint_dir.string());
  }
  {
    ScopedPhase phase(log, "load.native", Floor::DiskRead);
    CanonicalLookup lookup = [&checkpoint](const std::string& name) { return checkpoint.data(name); };
    // Device storages are filled through one pinned staging buffer of the largest storage (bounded host memory).
    uint64_t largest = 0;
    for (const auto& layout : layouts_) {
      for (const auto& spec : layout.storages) largest = std::max(largest, spec.bytes());
    }
    // The mode's own pinned memory (rank image, commit staging) is used when it offers it, so the load adds no
    // host memory of its own; a buffer of the largest storage is allocated only for storages it does not cover.
    HostBuffer staging;
    StorageLoader loader(options_.prepare_threads);  // nothing is served yet: every prepare thread loads
    for (size_t r = 0; r < layouts_.size(); ++r) {
      for (size_t s = 0; s < layouts_[r].storages.size(); ++s) {
        const RuntimeStorageSpec& spec = layouts_[r].storages[s];
        auto offered = host_storages_ ? mode_->native_load_staging(static_cast<int>(r), s, spec.bytes())
                                      : std::span<uint8_t>{};
        if (host_storages_ && offered.empty()) {
          loader.load_mapped(spec, lookup, host_storages_->storage(static_cast<int>(r), s));
        } else if (host_storages_) {
          loader.load_mapped(spec, lookup, offered);  // the mode keeps what it staged (device-delta's live image)
          storages_->write(static_cast<int>(r), s, 0, offered);
        } else {
          auto out = mode_->native_load_staging(static_cast<int>(r), s, spec.bytes());
          if (out.empty()) {
            if (staging.size() == 0) staging = HostBuffer(largest, kImageAlignment, pinner_);
            out = staging.span().subspan(0, spec.bytes());
          }
          loader.load_mapped(spec, lookup, out);
          storages_->write(static_cast<int>(r), s, 0, out);
          storages_->synchronize();
        }
        // Keep the resident set bounded: the mapped canonical pages are not needed again for this storage.
        for (const auto& fragment : spec.fragments) checkpoint.release(fragment.canonical);
        phase.add_bytes(spec.bytes());
      }
    }
  }
  mode_->on_native_load(checkpoint, version, log);
  state_ = std::make_unique<SyncStateMachine>(version);
  weight_version_ = version;
  loaded_ = true;
  report.version = version;
  report.seconds = steady_seconds() - start;
  report.bytes = storage_bytes();
  report.phases = log.records();
  return report;
}

GenerateResponse Engine::generate(const GenerateRequest& request) {
  if (request.input_ids.empty()) throw Error(ErrorKind::Format, "generate: input_ids is empty");
  if (request.max_new_tokens < 1) throw Error(ErrorKind::Format, "generate: max_new_tokens must be >= 1");
  for (int32_t id : request.input_ids) {
    if (id < 0 || id >= forward_->vocab()) {
      throw Error(ErrorKind::Format, fmt::format("generate: input id {} outside the vocabulary [0, {})", id,
                                                 forward_->vocab()));
    }
  }
  auto active = std::make_unique<Active>();
  active->request = request;
  auto future = active->promise.get_future();
  {
    std::lock_guard lock(mu_);
    if (!healthy_) throw Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_);
    if (!loaded_) throw Error(ErrorKind::State, "generate before the engine's native load");
    queue_.push_back(std::move(active));
  }
  cv_.notify_all();
  return future.get();
}

void Engine::run_step(Active& a) {
  const uint32_t version = weight_version_.load();
  if (!a.sequence || a.version != version) {
    // Weights changed under this request (a retracting commit): restart it so every token comes from one version;
    // this is also the KV-cache flush. An in_place commit moved a.version on instead, keeping the sequence.
    if (a.sequence) a.response.restarts += 1;
    a.sequence = forward_->new_sequence();
    a.fed = 0;
    a.version = version;
    a.response.output_ids.clear();
    a.response.logprobs.clear();
    a.response.step_versions.clear();
  }
  int32_t token;
  if (a.fed < a.request.input_ids.size()) {
    token = a.request.input_ids[a.fed++];
  } else {
    token = a.response.output_ids.back();
  }
  forward_->step(*a.sequence, token, a.logits);
  a.response.step_times.push_back(steady_seconds());
  // Stamped at the step that computed it, prefill included: a stamp taken at completion, or on output tokens only,
  // would hide a response whose prompt KV came from the old weights.
  a.response.step_versions.push_back(version);
  if (a.fed < a.request.input_ids.size()) return;  // still prefilling
  // Greedy choice: first index of the maximum; logprob = logit - logsumexp in a fixed (index) order.
  const auto& logits = a.logits;
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - logits[best]);
  a.response.output_ids.push_back(static_cast<int32_t>(best));
  if (a.request.return_logprob) a.response.logprobs.push_back(static_cast<float>(-std::log(sum)));
}

void Engine::scheduler_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || (!pause_requested_ && ((!draining_ && !queue_.empty()) || !active_.empty()));
    });
    if (stop_) break;
    if (!healthy_) {
      // A commit failed after mutation started: the storages may hold mixed versions, so nothing in flight may
      // produce another token.
      const auto error = std::make_exception_ptr(Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_));
      for (auto& a : active_) a->promise.set_exception(error);
      for (auto& a : queue_) a->promise.set_exception(error);
      active_.clear();
      queue_.clear();
      decoding_ = 0;
      continue;
    }
    while (!draining_ && !queue_.empty()) {
      active_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    decoding_ = active_.size();
    step_running_ = true;
    lock.unlock();
    // One decode step for every active sequence, in arrival order (each sequence is computed alone, so the
    // result does not depend on the batch composition). Only this thread changes active_ while a step runs.
    for (auto& a : active_) {
      try {
        run_step(*a);
      } catch (...) {
        a->promise.set_exception(std::current_exception());
        a.reset();
      }
    }
    lock.lock();
    step_running_ = false;
    const uint32_t version = weight_version_.load();
    for (auto& a : active_) {
      if (a && a->version == version &&
          static_cast<int>(a->response.output_ids.size()) >= a->request.max_new_tokens) {
        a->response.weight_version = a->version;
        a->response.text = detokenize(a->response.output_ids);
        a->promise.set_value(std::move(a->response));
        a.reset();
      }
    }
    std::erase_if(active_, [](const auto& a) { return a == nullptr; });
    decoding_ = active_.size();
    cv_.notify_all();
  }
  for (auto& a : active_) {
    a->promise.set_exception(std::make_exception_ptr(Error(ErrorKind::Fatal, "engine shut down")));
  }
  active_.clear();
}

void Engine::fail_all(const std::string& reason) {
  std::lock_guard lock(mu_);
  for (auto& a : queue_) a->promise.set_exception(std::make_exception_ptr(Error(ErrorKind::Fatal, reason)));
  queue_.clear();
}

void Engine::abort_all_locked() {
  auto finish = [this](Active& a) {
    a.response.finish_reason = "abort";
    a.response.weight_version = a.sequence ? a.version : weight_version_.load();
    a.response.text = detokenize(a.response.output_ids);
    a.promise.set_value(std::move(a.response));
  };
  for (auto& a : active_) finish(*a);
  for (auto& a : queue_) finish(*a);
  active_.clear();
  queue_.clear();
  decoding_ = 0;
}

double Engine::close_gate(std::unique_lock<std::mutex>& lock, PauseMode mode) {
  if (mode == PauseMode::Drain) {
    // New requests stay queued; those in flight finish on the old weights (SGLang's writer lock).
    draining_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return active_.empty() || !healthy_; });
  }
  pause_requested_ = true;
  cv_.wait(lock, [&] { return !step_running_; });
  if (mode == PauseMode::Abort) abort_all_locked();
  return steady_seconds();
}

void Engine::after_weights_changed_locked(uint32_t target, PauseMode mode) {
  if (mode != PauseMode::InPlace) return;  // retract: run_step restarts on the version change
  // in_place: the sequences keep the KV computed with the old weights and continue on the new ones.
  for (auto& a : active_) {
    if (a->sequence) a->version = target;
  }
}

void Engine::pause(PauseMode mode) {
  std::unique_lock lock(mu_);
  if (held_pause_) throw Error(ErrorKind::State, fmt::format("pause: already paused ({})", name_of(*held_pause_)));
  if (!healthy_) throw Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_);
  held_since_ = close_gate(lock, mode);
  held_pause_ = mode;
}

double Engine::resume() {
  {
    std::lock_guard lock(mu_);
    if (!held_pause_) throw Error(ErrorKind::State, "resume: the engine is not paused");
    held_pause_.reset();
    pause_requested_ = false;
    draining_ = false;
  }
  cv_.notify_all();
  return steady_seconds() - held_since_;
}

bool Engine::paused() const {
  std::lock_guard lock(mu_);
  return held_pause_.has_value();
}

PrepareReport Engine::prepare(uint32_t target) {
  {
    std::lock_guard lock(mu_);
    if (!healthy_) throw Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_);
  }
  PrepareReport report;
  report.target = target;
  const double start = steady_seconds();
  const PrepareTicket ticket = state_->begin_prepare(target);  // refuses while a commit runs
  if (ticket.action == PrepareAction::AlreadyPrepared) {
    report.already_prepared = true;
    report.seconds = steady_seconds() - start;
    return report;
  }
  PhaseLog log;
  try {
    if (debug_inside_prepare_) debug_inside_prepare_(target);
    mode_->prepare(ticket.served, target, log);
  } catch (...) {
    // A rejection found before the mode mutated anything keeps the previously prepared version usable.
    state_->finish_prepare(target, false, mode_->prepared_version());
    throw;
  }
  state_->finish_prepare(target, true, target);
  report.seconds = steady_seconds() - start;
  report.phases = log.records();
  return report;
}

CommitReport Engine::gated_commit(uint32_t target, PauseMode mode, const std::function<void(PhaseLog&)>& write,
                                  const std::function<void(bool)>& finish) {
  CommitReport report;
  report.target = target;
  const double start = steady_seconds();
  PhaseLog log;
  double pause_start = 0;
  bool held = false;
  {
    std::unique_lock lock(mu_);
    if (held_pause_) {
      held = true;  // pause() closed the gate: its mode decides what requests in flight see
      mode = *held_pause_;
      pause_start = steady_seconds();
    } else {
      pause_start = close_gate(lock, mode);
    }
  }
  std::string failure;
  CuptiTracer tracer;
  const bool trace = options_.cupti && !host_storages_;
  if (trace) {
    // Started inside the pause so that only the commit's copies are recorded (no decode step runs now). A tracer
    // that CUPTI refuses (another subscriber, e.g. nsys) leaves the commit untraced, never failed.
    const double t0 = steady_seconds();
    try {
      tracer.start();
    } catch (const std::exception& e) {
      report.cupti.note = fmt::format("CUPTI not started: {}", e.what());
    }
    report.cupti_overhead_seconds += steady_seconds() - t0;
  }
  try {
    if (debug_inside_pause_) debug_inside_pause_();
    write(log);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (tracer.active()) {
    const double t0 = steady_seconds();
    try {
      report.cupti = tracer.stop();  // the writer synchronized: every copy record is complete
    } catch (const std::exception& e) {
      report.cupti.note = fmt::format("CUPTI stop failed: {}", e.what());
    }
    report.cupti_overhead_seconds += steady_seconds() - t0;
  } else if (!trace) {
    report.cupti.note = host_storages_ ? "cpu backend: no device copies" : "CUPTI off for this engine";
  }
  {
    std::lock_guard lock(mu_);
    finish(failure.empty());
    if (failure.empty()) {
      weight_version_ = target;
      after_weights_changed_locked(target, mode);
    } else {
      healthy_ = false;
      fatal_reason_ = fmt::format("commit {} failed after mutation started: {}", version_string(target), failure);
      failure = fatal_reason_;
    }
    if (!held || !failure.empty()) {
      pause_requested_ = false;
      draining_ = false;
    }
    report.pause_seconds = steady_seconds() - pause_start;
  }
  cv_.notify_all();
  if (!failure.empty()) {
    // Queued requests get the error every later request gets (generate's and the scheduler's), not a second form.
    fail_all("engine stopped serving: " + failure);
    throw Error(ErrorKind::Fatal, failure);
  }
  report.seconds = steady_seconds() - start;
  report.phases = log.records();
  return report;
}

CommitReport Engine::commit(uint32_t target, PauseMode pause) {
  std::lock_guard control(control_mu_);
  {
    std::lock_guard lock(mu_);
    if (!healthy_) throw Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_);
  }
  const double start = steady_seconds();
  state_->begin_commit(target);  // from here until finish_commit no prepare may touch the prepared artefacts
  try {
    mode_->preflight(target);  // mutates nothing
  } catch (...) {
    state_->finish_commit(target, false);
    throw;
  }
  CommitReport report = gated_commit(
      target, pause,
      [&](PhaseLog& log) {
        if (device_transforms_) mode_->commit(*device_transforms_, log);
        else mode_->commit(*storages_, log);
      },
      [&](bool ok) { state_->finish_commit(target, ok); });
  report.seconds = steady_seconds() - start;  // preflight included
  return report;
}

CommitReport Engine::commit_canonical(const CanonicalLookup& lookup, uint32_t version, PauseMode pause) {
  std::lock_guard control(control_mu_);
  {
    std::lock_guard lock(mu_);
    if (!healthy_) throw Error(ErrorKind::Fatal, "engine stopped serving: " + fatal_reason_);
    if (!loaded_) throw Error(ErrorKind::State, "commit before the engine's native load");
  }
  uint64_t largest = 0;
  for (const auto& layout : layouts_) {
    for (const auto& spec : layout.storages) largest = std::max(largest, spec.bytes());
  }
  // Allocated (and pinned) before the gate closes: the pause holds only reads, transforms and copies.
  HostBuffer staging(host_storages_ ? 0 : largest, kImageAlignment, pinner_);
  return gated_commit(
      version, pause,
      [&](PhaseLog& log) {
        ScopedPhase phase(log, "commit.reload", Floor::DiskRead);
        for (size_t r = 0; r < layouts_.size(); ++r) {
          const int rank = static_cast<int>(r);
          for (size_t s = 0; s < layouts_[r].storages.size(); ++s) {
            const RuntimeStorageSpec& spec = layouts_[r].storages[s];
            // As the native load: transformed on the host, written as the storage's runtime bytes.
            if (host_storages_) {
              load_storage(spec, lookup, host_storages_->storage(rank, s));
            } else {
              auto out = staging.span().subspan(0, spec.bytes());
              load_storage(spec, lookup, out);
              storages_->write(rank, s, 0, out);
              storages_->synchronize();
            }
            fault_point(options_.fault_hook, FaultSite{FaultPoint::CommitStorageWritten, rank, s, spec.name});
            phase.add_bytes(spec.bytes());
          }
        }
      },
      [](bool) {});
}

CommitReport Engine::commit_checkpoint(const std::filesystem::path& checkpoint_dir, uint32_t version,
                                       PauseMode pause) {
  CheckpointReader checkpoint(checkpoint_dir);
  for (const auto& spec : options_.profile.canonical_tensors()) {
    expect_tensor(checkpoint, spec, checkpoint_dir.string());  // before the pause: nothing changes on a refusal
  }
  return commit_canonical([&checkpoint](const std::string& name) { return checkpoint.data(name); }, version, pause);
}

std::vector<std::map<std::string, std::string>> Engine::storage_checksums() const {
  std::lock_guard control(control_mu_);
  std::vector<std::map<std::string, std::string>> out(layouts_.size());
  std::vector<uint8_t> copy;  // device storages are hashed from a host copy (D2H)
  for (size_t r = 0; r < layouts_.size(); ++r) {
    for (size_t s = 0; s < layouts_[r].storages.size(); ++s) {
      const int rank = static_cast<int>(r);
      std::span<const uint8_t> bytes;
      if (host_storages_) {
        bytes = host_storages_->storage(rank, s);
      } else {
        copy.resize(storages_->storage_bytes(rank, s));
        storages_->read(rank, s, copy);
        bytes = copy;
      }
      out[r][layouts_[r].storages[s].name] = xxh3_128_hex(bytes);
    }
  }
  return out;
}

std::vector<std::vector<StoragePointer>> Engine::storage_pointers() const {
  std::vector<std::vector<StoragePointer>> out(layouts_.size());
  for (size_t r = 0; r < layouts_.size(); ++r) {
    for (size_t s = 0; s < layouts_[r].storages.size(); ++s) {
      const int rank = static_cast<int>(r);
      out[r].push_back(StoragePointer{layouts_[r].storages[s].name, storages_->address(rank, s),
                                      storages_->storage_bytes(rank, s)});
    }
  }
  return out;
}

size_t Engine::debug_requests_held() const {
  std::lock_guard lock(mu_);
  return queue_.size() + decoding_;
}

void Engine::debug_flip_storage_byte(int rank, size_t storage, uint64_t offset) {
  std::lock_guard control(control_mu_);
  std::lock_guard lock(mu_);
  storages_->flip_byte(rank, storage, offset);
}

void Engine::debug_corrupt_staged_delta(uint64_t offset) {
  if (device_transforms_) device_transforms_->corrupt_staged_delta(offset);
  else storages_->corrupt_staged_delta(offset);
}

}  // namespace wsb
