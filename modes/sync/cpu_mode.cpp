#include "modes/sync/cpu_mode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "models/core/errors.hpp"
#include "models/core/nvtx.hpp"
#include "modes/store/publication.hpp"
#include "modes/sync/delta_fold.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

CpuMode::CpuMode(SyncContext context) : context_(std::move(context)) {
  canonical_ = context_.profile.canonical_tensors();
  uint64_t cursor = 0;
  for (size_t i = 0; i < canonical_.size(); ++i) {
    canonical_index_[canonical_[i].name] = i;
    cursor = align_up(cursor, kStorageAlignment);
    canonical_offsets_.push_back(cursor);
    cursor += canonical_[i].bytes();
  }
  canonical_image_ = HostBuffer(cursor, kImageAlignment);
  for (const auto& layout : context_.layouts) sets_[0].emplace_back(layout, context_.pinner);
  if (device_delta()) {
    for (const auto& layout : context_.layouts) sets_[1].emplace_back(layout, context_.pinner);
  } else if (context_.commit_strategy != kCommitFull) {
    throw Error(ErrorKind::Format, fmt::format("cpu mode: commit strategy '{}' is unknown (expected \"{}\" or \"{}\")",
                                               context_.commit_strategy, kCommitFull, kCommitDeviceDelta));
  }
}

std::span<uint8_t> CpuMode::tensor_span(size_t index) {
  return canonical_image_.span().subspan(canonical_offsets_[index], canonical_[index].bytes());
}

std::span<const uint8_t> CpuMode::canonical_tensor(const std::string& name) const {
  auto it = canonical_index_.find(name);
  if (it == canonical_index_.end()) throw Error(ErrorKind::Missing, fmt::format("cpu mode: no tensor '{}'", name));
  return canonical_image_.span().subspan(canonical_offsets_[it->second], canonical_[it->second].bytes());
}

void CpuMode::on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) {
  ScopedPhase phase(log, "load.canonical_image", Floor::HostMemcpy);
  for (size_t i = 0; i < canonical_.size(); ++i) {
    const auto& spec = canonical_[i];
    expect_tensor(checkpoint, spec, checkpoint.dir().string());
    auto src = checkpoint.data(spec.name);
    std::copy(src.begin(), src.end(), tensor_span(i).begin());
    checkpoint.release(spec.name);  // the canonical image now holds it; keep the resident set bounded
    phase.add_bytes(src.size());
  }
  canonical_version_ = version;
  loaded_ = true;
  images_version_.reset();
  size_t storages = 0;
  for (const auto& layout : context_.layouts) storages += layout.storages.size();
  // The native load staged every storage in set 0 and copied it from there: set 0 now holds the live bytes.
  live_set_ = 0;
  live_known_ = native_staged_ == storages;
  native_staged_ = 0;
  staged_.clear();
}

std::vector<std::vector<CpuMode::Placement>> CpuMode::plan_placements(std::vector<bool>& placed) {
  std::vector<std::vector<Placement>> by_tensor(canonical_.size());
  std::vector<RankImage>& images = sets_[prepared_set_];
  size_t flat = 0;
  for (size_t r = 0; r < images.size(); ++r) {
    for (size_t s = 0; s < context_.layouts[r].storages.size(); ++s, ++flat) {
      std::vector<FragmentRun> runs = fragment_runs(context_.layouts[r].storages[s]);
      // Every fragment must name a canonical tensor of the size its shape implies; otherwise load_storage reports it.
      const bool known = !runs.empty() && std::all_of(runs.begin(), runs.end(), [&](const FragmentRun& run) {
        auto it = canonical_index_.find(run.canonical);
        return it != canonical_index_.end() && canonical_[it->second].bytes() == run.canonical_bytes;
      });
      if (!known) continue;
      for (FragmentRun& run : runs) {
        by_tensor[canonical_index_.find(run.canonical)->second].push_back(Placement{images[r].storage(s), std::move(run)});
      }
      placed[flat] = true;
    }
  }
  return by_tensor;
}

void CpuMode::build_rank_images(PhaseLog& log, const std::vector<bool>& placed) {
  ScopedPhase phase(log, "prepare.transform", Floor::HostMemcpy);
  CanonicalLookup lookup = [this](const std::string& name) { return canonical_tensor(name); };
  std::vector<RankImage>& images = sets_[prepared_set_];
  // Every (rank, storage, expert range) is independent: storages are disjoint, expert ranges of one storage write
  // disjoint bytes, and the canonical image is only read. A stacked-expert storage is split into ranges of about
  // kPieceBytes, so its size (it grows with the expert count) never leaves one thread working while the rest wait.
  constexpr uint64_t kPieceBytes = 32ull << 20;
  struct Item {
    size_t rank, storage;
    int64_t first, count;
    uint64_t bytes;
  };
  std::vector<Item> items;
  uint64_t built = 0;
  size_t flat = 0;
  for (size_t r = 0; r < images.size(); ++r) {
    for (size_t s = 0; s < context_.layouts[r].storages.size(); ++s, ++flat) {
      if (placed[flat]) continue;
      const RuntimeStorageSpec& spec = context_.layouts[r].storages[s];
      built += spec.bytes();
      const int64_t slices = storage_slices(spec);
      const uint64_t slice_bytes = spec.bytes() / static_cast<uint64_t>(slices);
      const int64_t per = slices == 1 ? 1 : std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes / std::max<uint64_t>(slice_bytes, 1)));
      for (int64_t first = 0; first < slices; first += per) {
        const int64_t count = std::min(per, slices - first);
        items.push_back(Item{r, s, first, count, slice_bytes * static_cast<uint64_t>(count)});
      }
    }
  }
  run_largest_first(
      items.size(), context_.threads, [&](size_t i) { return items[i].bytes; },
      [&](size_t i) {
        const Item& it = items[i];
        const RuntimeStorageSpec& spec = context_.layouts[it.rank].storages[it.storage];
        if (it.count == storage_slices(spec)) {
          load_storage(spec, lookup, images[it.rank].storage(it.storage));
        } else {
          load_storage_slices(spec, lookup, images[it.rank].storage(it.storage), it.first, it.count);
        }
      });
  phase.add_bytes(built);
}

void CpuMode::prepare(uint32_t served, uint32_t target, PhaseLog& log) {
  if (!loaded_) throw Error(ErrorKind::State, "cpu mode: prepare before the engine's native load");
  if (canonical_version_ > target) {
    throw Error(ErrorKind::State, fmt::format("cpu mode: the canonical image holds {}, newer than target {} (served {})",
                                              version_string(canonical_version_), version_string(target),
                                              version_string(served)));
  }
  prepared_set_ = device_delta() && live_known_ ? 1 - live_set_ : live_set_;
  size_t storages = 0;
  for (const auto& layout : context_.layouts) storages += layout.storages.size();
  std::vector<bool> placed(storages, false);
  if (canonical_version_ < target) {
    Store store(context_.store);
    UpdatePlan plan;
    {
      ScopedPhase phase(log, "prepare.plan");
      plan = plan_update(store, canonical_version_, target);
      check_plan_covers(plan, canonical_);
    }
    images_version_.reset();  // from here on the rank images are rebuilt for the target
    {
      // Stage the compressed deltas once: fault every payload page in (they are memory-mapped).
      ScopedPhase phase(log, "prepare.stage", Floor::DiskRead);
      uint64_t sink = 0;
      for (const auto& step : plan.steps) {
        for (const auto& spec : canonical_) {
          auto payload = step->payload(spec.name);
          for (size_t i = 0; i < payload.size(); i += 4096) sink += payload[i];
          phase.add_bytes(payload.size());
        }
      }
      volatile uint64_t keep = sink;
      (void)keep;
    }
    {
      ScopedPhase phase(log, "prepare.apply_verify", Floor::HostMemcpy);
      // Plain-gather storages are written from each final chunk while it is in cache: one memory pass less than
      // folding everything and then gathering it (prepare is memory-bound).
      const auto placements = plan_placements(placed);
      std::vector<FoldUndo> undo(canonical_.size());
      std::unique_ptr<bool[]> folded(new bool[canonical_.size()]());
      try {
        run_largest_first(
            canonical_.size(), context_.threads, [&](size_t i) { return canonical_[i].bytes(); },
            [&](size_t i) {
              const std::span<uint8_t> bytes = tensor_span(i);
              const auto& targets = placements[i];
              const FoldedRange place = [&](size_t from, size_t to) {
                for (const Placement& p : targets) place_run_range(p.run, bytes, from, to, p.storage);
              };
              fold_tensor(plan, canonical_[i], bytes, &undo[i], targets.empty() ? FoldedRange{} : place);
            },
            folded.get());
      } catch (...) {
        // Checksums are verified before anything is used: put every folded tensor back. The placed bytes stay in
        // the image set being prepared, which nothing reads until images_version_ is set again.
        for (size_t i = 0; i < canonical_.size(); ++i) {
          if (folded[i]) unfold_tensor(plan, undo[i], tensor_span(i));
        }
        throw;
      }
      for (const auto& spec : canonical_) phase.add_bytes(spec.bytes());
    }
    canonical_version_ = target;
  }
  images_version_.reset();
  staged_.clear();
  build_rank_images(log, placed);
  if (device_delta()) stage_device_delta(target, log);
  images_version_ = target;
}

void CpuMode::preflight(uint32_t target) const {
  if (!images_version_ || *images_version_ != target) {
    throw Error(ErrorKind::State, fmt::format("cpu mode: rank images are not prepared for {}", version_string(target)));
  }
  // Before the gate closes: a staged delta whose bytes changed since they were verified is dropped, and this
  // commit copies every storage in full instead (the rank images are verified; the staged copy is not).
  delta_rejected_ = false;
  if (!staged_.empty() && !context_.live->staged_deltas_intact()) {
    staged_.clear();
    delta_rejected_ = true;
  }
}

void CpuMode::commit(StorageTarget& storages, PhaseLog& log) {
  if (device_delta()) {
    commit_device_delta(storages, log);
    return;
  }
  ScopedPhase phase(log, "commit.copy", storages.copy_floor());
  const std::vector<RankImage>& images = sets_[prepared_set_];
  // Every rank's copies are issued before any is waited for, so ranks on different devices copy in parallel.
  for (size_t r = 0; r < images.size(); ++r) {
    NvtxRange rank_range(fmt::format("commit.copy rank {}", r));
    for (size_t s = 0; s < images[r].storage_count(); ++s) {
      storages.write(static_cast<int>(r), s, 0, images[r].storage(s));
      fault_point(context_.fault_hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s,
                                        context_.layouts[r].storages[s].name});
    }
    phase.add_bytes(images[r].payload_bytes());
  }
  NvtxRange wait_range("commit.copy wait");
  storages.synchronize();
}

std::span<uint8_t> CpuMode::native_load_staging(int rank, size_t index, uint64_t bytes) {
  RankImage& image = sets_[0].at(static_cast<size_t>(rank));
  auto span = image.storage(index);
  // device-delta needs set 0 to hold the live bytes after the load, pinned or not.
  if (span.size() != bytes || !(image.pinned() || device_delta())) return {};
  ++native_staged_;
  return span;
}

ModeMemory CpuMode::memory() const {
  ModeMemory m;
  m.canonical_bytes = canonical_image_.size();
  for (const auto& set : sets_) {
    for (const auto& image : set) m.rank_image_bytes += image.bytes();
  }
  return m;
}

}  // namespace wsb
