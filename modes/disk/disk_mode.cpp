#include "modes/disk/disk_mode.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/publication.hpp"
#include "modes/sync/checkpoint_files.hpp"
#include "modes/sync/delta_fold.hpp"

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

void DiskMode::on_native_load(const CheckpointReader&, uint32_t, PhaseLog&) {
  // Nothing to keep in memory: the mutable checkpoint is seeded lazily by the first prepare.
}

void DiskMode::reseed(const Store& store, uint32_t full_version, PhaseLog& log) {
  ScopedPhase phase(log, "prepare.seed", Floor::DiskRead);
  Publication full(store, full_version);
  clear_state();
  std::error_code ec;
  fs::remove_all(checkpoint_dir(), ec);
  fs::create_directories(checkpoint_dir());
  std::set<std::string> files{kIndexFileName};
  for (const auto& [tensor, shard] : read_checkpoint_index(full.dir() / kIndexFileName).weight_map) files.insert(shard);
  for (const auto& file : files) {
    fs::create_directories((checkpoint_dir() / file).parent_path());
    phase.add_bytes(copy_file_all(full.dir() / file, checkpoint_dir() / file));
  }
  // Verify the seed as copied, tensor by tensor, against the FULL publication's checksums.
  CheckpointReader seeded(checkpoint_dir());
  for (const auto& spec : canonical_) {
    expect_tensor(seeded, spec, fmt::format("publication {}", version_string(full_version)));
    const std::string actual = xxh3_128_hex(seeded.data(spec.name));
    seeded.release(spec.name);  // verified: its pages need not stay in this process (bounded RSS)
    if (actual != full.expected_checksum(spec.name)) {
      throw Error(ErrorKind::Checksum, fmt::format("publication {}: tensor '{}' xxh3-128 {} != {}",
                                                   version_string(full_version), spec.name, actual,
                                                   full.expected_checksum(spec.name)));
    }
  }
  for (const auto& file : files) fsync_path(checkpoint_dir() / file, false);
  write_state(DiskLineageState{full_version, full_version, fs::absolute(store.root()).lexically_normal().string(),
                               publication_digest(full)});
}

void DiskMode::apply_plan(const UpdatePlan& plan, uint32_t seeded_from, const Store& store, PhaseLog& log) {
  clear_state();  // from here until write_state the checkpoint is unverified (crash => reseed)
  std::set<fs::path> touched;
  {
    ScopedPhase phase(log, "prepare.apply_verify_write", Floor::DiskRead);
    CheckpointReader local(checkpoint_dir());
    std::vector<uint8_t> heap;  // only for a canonical tensor larger than a staging buffer (a sharded one)
    for (size_t t = 0; t < canonical_.size(); ++t) {
      const TensorSpec& spec = canonical_[t];
      const auto& entry = expect_tensor(local, spec, checkpoint_dir().string());
      auto current = local.data(spec.name);
      // The commit staging is idle during prepare (the state machine never overlaps them): folding in it adds no
      // host memory of its own, which keeps the mode within its bounded staging.
      std::span<uint8_t> buffer;
      if (current.size() <= staging_bytes_) {
        buffer = staging_[0].span().subspan(0, current.size());
      } else {
        heap.resize(current.size());
        buffer = heap;
      }
      std::copy(current.begin(), current.end(), buffer.begin());
      local.release(spec.name);  // the buffer holds it now
      fold_tensor(plan, spec, buffer, nullptr);
      const auto& shard = local.shard_of(spec.name);
      Fd fd(shard.path(), O_WRONLY);
      pwrite_all(fd.get(), buffer, shard.data_start() + entry.begin, shard.path());
      touched.insert(shard.path());
      phase.add_bytes(buffer.size());
      fault_point(context_.fault_hook, {FaultPoint::DiskCheckpointWrite, 0, t, spec.name});
    }
  }
  {
    ScopedPhase phase(log, "prepare.fsync");
    for (const auto& path : touched) fsync_path(path, true);
  }
  write_state(DiskLineageState{plan.to, seeded_from, fs::absolute(store.root()).lexically_normal().string(),
                               publication_digest(*plan.steps.back())});
}

void DiskMode::prepare(uint32_t served, uint32_t target, PhaseLog& log) {
  (void)served;
  Store store(context_.store);
  auto state = read_state();
  if (state && !state_matches(*state, store)) state.reset();  // another store, or the version was re-published
  if (state && state->version == target) {
    prepared_ = target;  // already materialized and verified from this very publication
    return;
  }
  std::optional<uint32_t> base;
  if (state && state->version < target) base = state->version;
  UpdatePlan plan;
  {
    ScopedPhase phase(log, "prepare.plan");
    if (!store.has(target)) {
      throw Error(ErrorKind::Missing,
                  fmt::format("version {} not published in {}", version_string(target), store.root().string()));
    }
    if (!base) {
      // Seed from the newest FULL publication at or before the target.
      for (uint32_t v : store.versions()) {
        if (v <= target && Publication(store, v).is_full()) base = v;
      }
      if (!base) {
        throw Error(ErrorKind::Missing, fmt::format("no FULL publication at or before {} in {}", version_string(target),
                                                    store.root().string()));
      }
    }
    if (*base < target) {
      plan = plan_update(store, *base, target);
      check_plan_covers(plan, canonical_);
    }
  }
  prepared_.reset();  // everything checkable without mutation passed: the checkpoint now changes
  const bool reuse = state && state->version == *base;
  const uint32_t seeded_from = reuse ? state->seeded_from : *base;
  if (!reuse) reseed(store, *base, log);
  if (*base < target) apply_plan(plan, seeded_from, store, log);
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
      load_storage(spec, lookup, out);
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
  ScopedPhase phase(log, "commit.copy_wait");
  storages.synchronize();
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
