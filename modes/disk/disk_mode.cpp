#include "modes/disk/disk_mode.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <system_error>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/publication.hpp"
#include "modes/disk/disk_materialize.hpp"
#include "modes/sync/checkpoint_files.hpp"
#include "modes/sync/delta_fold.hpp"
#include "modes/sync/storage_loader.hpp"

namespace wsb {
namespace fs = std::filesystem;

DiskMode::DiskMode(SyncContext context) : context_(std::move(context)) {
  canonical_ = context_.profile.canonical_tensors();
  for (const auto& layout : context_.layouts) {
    for (const auto& storage : layout.storages) {
      staging_bytes_ = std::max<uint64_t>({staging_bytes_, storage.bytes(), storage.gathered_bytes()});
    }
  }
  // Two staging buffers of the largest storage, allocated (and pinned on CUDA) once, never inside a pause: the
  // reload reads/transforms storage i into one while storage i-1 is copied out of the other.
  for (auto& buffer : staging_) buffer = HostBuffer(staging_bytes_, 4096, context_.pinner);
}

DiskMode::~DiskMode() { finish_retiring(); }

void DiskMode::finish_retiring() {
  std::lock_guard lock(retire_mu_);
  if (retiring_.joinable()) retiring_.join();
}

fs::path DiskMode::checkpoint_dir() const { return context_.workdir / "checkpoint"; }

std::optional<DiskLineageState> DiskMode::read_state() const {
  const fs::path path = checkpoint_dir() / ".weight_sync" / "state.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    DiskLineageState state;
    state.version = parse_version_string(j.at("version").get<std::string>(), path.string() + ": version");
    state.seeded_from = parse_version_string(j.at("seeded_from").get<std::string>(), path.string() + ": seeded_from");
    state.store = j.at("store").get<std::string>();
    state.digest = j.at("digest").get<std::string>();
    return state;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // an unreadable state is an unverified checkpoint: reseed
  } catch (const Error&) {
    return std::nullopt;
  }
}

void DiskMode::clear_state() const {
  const fs::path dir = checkpoint_dir() / ".weight_sync";
  std::error_code ec;
  fs::remove(dir / "state.json", ec);
  if (fs::exists(dir)) fsync_path(dir, false);
}

void DiskMode::write_state(const DiskLineageState& state) const {
  const fs::path dir = checkpoint_dir() / ".weight_sync";
  fs::create_directories(dir);
  const fs::path tmp = dir / "state.json.tmp";
  // Written with checked writes: a buffered stream would report a full disk only in its destructor, after the
  // state had been renamed into place empty.
  const std::string text = nlohmann::json{{"version", version_string(state.version)},
                                          {"seeded_from", version_string(state.seeded_from)},
                                          {"store", state.store},
                                          {"digest", state.digest}}
                               .dump(2) +
                           "\n";
  write_file_all(tmp, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  fs::rename(tmp, dir / "state.json");
  fsync_path(dir, false);
}

std::string publication_digest(const Publication& publication) {
  Xxh3Hasher hasher;
  for (const auto& name : publication.tensor_names()) {  // sorted
    const std::string line = name + "\t" + publication.expected_checksum(name) + "\n";
    hasher.update({reinterpret_cast<const uint8_t*>(line.data()), line.size()});
  }
  return hasher.hex();
}

bool DiskMode::state_matches(const DiskLineageState& state, const Store& store) const {
  if (state.store != fs::absolute(store.root()).lexically_normal().string() || !store.has(state.version)) return false;
  try {
    return publication_digest(Publication(store, state.version)) == state.digest;
  } catch (const Error&) {
    return false;  // the publication it came from is unreadable now: reseed
  }
}

void DiskMode::on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog&) {
  // The checkpoint just loaded holds `version`: the first prepare can fold from it directly instead of seeding
  // from a FULL publication and replaying the lineage (its final checksums prove it was what it claimed).
  native_.emplace(fs::absolute(checkpoint.dir()).lexically_normal(), version);
}

std::optional<DiskBase> DiskMode::newest_full(const Store& store, uint32_t target) const {
  std::optional<DiskBase> full;
  for (uint32_t v : store.versions()) {
    if (v <= target && Publication(store, v).is_full()) {
      full = DiskBase{DiskBase::Kind::Full, store.update_dir(v), v, v};
    }
  }
  return full;
}

UpdatePlan DiskMode::plan_from(const Store& store, const DiskBase& base, uint32_t target) const {
  UpdatePlan plan;
  plan.from = plan.to = target;
  if (base.version < target) {
    plan = plan_update(store, base.version, target);
    check_plan_covers(plan, canonical_);
  }
  return plan;
}

namespace {

fs::path next_dir(const fs::path& checkpoint) { return checkpoint.string() + ".next"; }
fs::path old_dir(const fs::path& checkpoint) { return checkpoint.string() + ".old"; }

std::string origin_of(const DiskBase& base) {
  return base.kind == DiskBase::Kind::Full ? fmt::format("publication {}", version_string(base.version))
                                           : base.dir.string();
}

}  // namespace

void DiskMode::materialize(const Store& store, const DiskBase& base, const UpdatePlan& plan, uint32_t target,
                           PhaseLog& log) {
  const fs::path next = next_dir(checkpoint_dir());
  std::error_code ec;
  fs::remove_all(next, ec);  // a crashed prepare's leftovers: never trusted, never reused
  std::unique_ptr<Publication> full;
  const Publication* checksums = plan.steps.empty() ? nullptr : plan.steps.back().get();
  if (checksums == nullptr) {
    full = std::make_unique<Publication>(store, base.version);  // only a FULL base is ever at the target already
    checksums = full.get();
  }
  MaterializeJob job{.base = base.dir,
                     .base_origin = origin_of(base),
                     .plan = &plan,
                     .target = checksums,
                     .version = target,
                     .out = next,
                     .threads = context_.threads,
                     .drop_base_cache = base.kind == DiskBase::Kind::Local,
                     .fault_hook = context_.fault_hook};
  try {
    ScopedPhase phase(log, "prepare.materialize", Floor::DiskReadWrite);
    phase.add_bytes(materialize_checkpoint(job, canonical_).tensor_bytes);
  } catch (...) {
    fs::remove_all(next, ec);
    throw;
  }
}

void DiskMode::swap_in(const Store& store, const DiskBase& base, const UpdatePlan& plan, uint32_t target,
                       PhaseLog& log) {
  ScopedPhase phase(log, "prepare.swap");
  const fs::path checkpoint = checkpoint_dir();
  const fs::path old = old_dir(checkpoint);
  std::error_code ec;
  fs::remove_all(old, ec);
  if (fs::exists(checkpoint)) {
    clear_state();  // from here until write_state no checkpoint is vouched for (a crash => reseed)
    fs::rename(checkpoint, old);
  }
  fault_point(context_.fault_hook, {FaultPoint::DiskCheckpointSwap, 0, 0, checkpoint.string()});
  fs::rename(next_dir(checkpoint), checkpoint);
  fsync_path(context_.workdir, false);
  const std::string digest =
      plan.steps.empty() ? publication_digest(Publication(store, target)) : publication_digest(*plan.steps.back());
  write_state(DiskLineageState{target, base.seeded_from, fs::absolute(store.root()).lexically_normal().string(),
                               digest});
  // The replaced checkpoint, now without a state file, is never a base again: the commit removes it once the
  // reload is done (a later swap removes it first if no commit came).
  if (fs::exists(old)) retired_ = old;
}

void DiskMode::prepare(uint32_t served, uint32_t target, PhaseLog& log) {
  (void)served;
  if (!retire_done_.load()) {
    // The last commit's cleanup is still unlinking the checkpoint it replaced: the swap below reuses its name.
    ScopedPhase phase(log, "prepare.retire_wait");
    finish_retiring();
  }
  finish_retiring();  // joins a removal that is already over
  Store store(context_.store);
  auto state = read_state();
  if (state && !state_matches(*state, store)) state.reset();  // another store, or the version was re-published
  if (state && state->version == target) {
    prepared_ = target;  // already materialized and verified from this very publication
    last_base_.reset();
    return;
  }
  DiskBase base;
  std::optional<DiskBase> fallback;  // the FULL seed, should a native checkpoint not be what it claims
  UpdatePlan plan;
  {
    ScopedPhase phase(log, "prepare.plan");
    if (!store.has(target)) {
      throw Error(ErrorKind::Missing,
                  fmt::format("version {} not published in {}", version_string(target), store.root().string()));
    }
    // The newest base wins (fewest deltas to fold); on a tie the mode's own checkpoint, which its state vouches
    // for, then the store's FULL, then the natively loaded checkpoint.
    std::optional<DiskBase> best = newest_full(store, target);
    if (native_ && native_->second < target) {
      std::error_code ec;
      const fs::path published = store.update_dir(native_->second);
      const bool is_publication = store.has(native_->second) && fs::equivalent(native_->first, published, ec);
      if (!is_publication && (!best || native_->second > best->version)) {
        fallback = best;
        best = DiskBase{DiskBase::Kind::Native, native_->first, native_->second, native_->second};
      }
    }
    if (state && state->version < target && (!best || state->version >= best->version)) {
      best = DiskBase{DiskBase::Kind::Local, checkpoint_dir(), state->version, state->seeded_from};
      fallback.reset();
    }
    if (!best) {
      throw Error(ErrorKind::Missing, fmt::format("no FULL publication at or before {} in {}", version_string(target),
                                                  store.root().string()));
    }
    base = *best;
    plan = plan_from(store, base, target);
  }
  prepared_.reset();  // everything checkable without mutation passed: what was prepared is superseded
  try {
    materialize(store, base, plan, target, log);
  } catch (const Error& e) {
    // A native checkpoint that is not the store's version (or is gone) is no base; the FULL seed still is. A full
    // disk or an I/O fault would fail the seed the same way.
    if (!fallback || e.kind() == ErrorKind::Resource || e.kind() == ErrorKind::Io) throw;
    UpdatePlan seed_plan;
    try {
      seed_plan = plan_from(store, *fallback, target);
    } catch (const Error&) {
      throw e;  // the store cannot replay the lineage from its FULL: the native checkpoint's error is the one to see
    }
    base = *fallback;
    plan = std::move(seed_plan);
    materialize(store, base, plan, target, log);
  }
  swap_in(store, base, plan, target, log);
  last_base_ = base;
  prepared_ = target;
}

void DiskMode::preflight(uint32_t target) const {
  auto state = read_state();
  if (!prepared_ || *prepared_ != target || !state || state->version != target) {
    throw Error(ErrorKind::State,
                fmt::format("disk mode: {} holds no verified checkpoint of {}", checkpoint_dir().string(),
                            version_string(target)));
  }
}

void DiskMode::commit(StorageTarget& storages, PhaseLog& log) {
  CheckpointReader local(checkpoint_dir());
  CanonicalLookup lookup = [&local](const std::string& name) { return local.data(name); };
  // The pause is a reload: every storage is gathered and transformed on all the threads, so the host work of FP8
  // and MXFP4 storages keeps up with the disk.
  StorageLoader loader(context_.threads);
  std::vector<std::pair<size_t, size_t>> order;  // (rank, storage) in reload order
  for (size_t r = 0; r < context_.layouts.size(); ++r) {
    for (size_t s = 0; s < context_.layouts[r].storages.size(); ++s) order.emplace_back(r, s);
  }
  auto spec_of = [&](size_t i) -> const RuntimeStorageSpec& {
    return context_.layouts[order[i].first].storages[order[i].second];
  };
  auto prefetch = [&](size_t i) {
    if (i < order.size()) {
      for (const auto& fragment : spec_of(i).fragments) local.prefetch(fragment.canonical);
    }
  };
  prefetch(0);
  for (size_t i = 0; i < order.size(); ++i) {
    const auto [r, s] = order[i];
    const RuntimeStorageSpec& spec = spec_of(i);
    prefetch(i + 1);  // the disk reads ahead while this storage is gathered and transformed
    if (storages.transforms_on_device(spec)) {
      // The device transform reads the gathered shards (never larger than the storage) and writes the live
      // storage itself; it returns once done, so this buffer is free again afterwards.
      auto gathered = staging_[i % 2].span().subspan(0, spec.gathered_bytes());
      {
        ScopedPhase phase(log, "commit.read_gather", Floor::DiskRead, spec.gathered_bytes());
        gather_storage(spec, lookup, gathered);
      }
      for (const auto& fragment : spec.fragments) local.release(fragment.canonical);
      ScopedPhase phase(log, "commit.device_transform", storages.copy_floor(), spec.gathered_bytes());
      storages.write_transformed(static_cast<int>(r), s, spec, gathered);
      fault_point(context_.fault_hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s, spec.name});
      continue;
    }
    auto out = staging_[i % 2].span().subspan(0, spec.bytes());
    {
      ScopedPhase phase(log, "commit.read_transform", Floor::DiskRead, spec.bytes());
      loader.load_mapped(spec, lookup, out);
    }
    for (const auto& fragment : spec.fragments) local.release(fragment.canonical);
    // The previous storage's copy (from the other buffer) overlapped the read above; it must land before this
    // buffer's copy is issued, and before the other buffer is refilled next iteration.
    {
      ScopedPhase phase(log, "commit.copy_wait");  // copy time the reads did not hide
      storages.synchronize();
    }
    storages.write(static_cast<int>(r), s, 0, out);
    fault_point(context_.fault_hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s, spec.name});
  }
  {
    ScopedPhase phase(log, "commit.copy_wait");
    storages.synchronize();
  }
  retire_in_background();
}

void DiskMode::retire_in_background() {
  if (retired_.empty()) return;
  const fs::path old = std::exchange(retired_, fs::path());
  auto remove = [old, done = &retire_done_] {
    std::error_code ec;
    fs::remove_all(old, ec);  // a leftover is removed by the next swap
    done->store(true);
  };
  std::lock_guard lock(retire_mu_);
  if (retiring_.joinable()) retiring_.join();  // the prepare joined it already; a commit never overlaps one
  retire_done_ = false;
  try {
    retiring_ = std::thread(remove);
  } catch (const std::system_error&) {
    remove();  // no thread to be had: remove it here, after the reload all the same
  }
}

std::span<uint8_t> DiskMode::native_load_staging(int, size_t, uint64_t bytes) {
  if (bytes > staging_bytes_ || !staging_[0].pinned()) return {};
  return staging_[0].span().subspan(0, bytes);
}

ModeMemory DiskMode::memory() const {
  ModeMemory m;
  m.staging_bytes = 2 * staging_bytes_;
  return m;
}

}  // namespace wsb
