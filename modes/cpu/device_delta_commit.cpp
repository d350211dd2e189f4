#include "modes/cpu/device_delta_commit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "core/nvtx.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

uint64_t delta_pack_budget(uint64_t storage_bytes, uint64_t area_bytes) {
  const uint64_t share = std::clamp<uint64_t>(storage_bytes / 8, 1ull << 20, 1ull << 30);
  return std::min(share, area_bytes);
}

DeviceDeltaCommit::DeviceDeltaCommit(const SyncContext& context, std::vector<RankImage>& images)
    : context_(context), images_(images) {
  for (size_t r = 0; r < images_.size(); ++r) {
    for (size_t s = 0; s < images_[r].storage_count(); ++s) {
      storages_.push_back({static_cast<int>(r), s});
      bytes_.push_back(images_[r].storage(s).size());
    }
  }
  StorageTarget* live = context_.live;
  if (live == nullptr) return;
  std::map<int, int> ordinal;  // staging group id -> recorder group
  std::vector<uint64_t> served, area;
  for (size_t r = 0; r < images_.size(); ++r) {
    const int rank = static_cast<int>(r);
    const uint64_t capacity = live->delta_staging_bytes(rank);
    if (capacity == 0) return;  // a rank without a staging area: every commit copies in full
    const auto [it, added] = ordinal.emplace(live->delta_staging_group(rank), static_cast<int>(ordinal.size()));
    if (added) {
      group_ids_.push_back(it->first);
      served.push_back(0);
      area.push_back(capacity);
    }
    group_of_rank_.push_back(it->second);
    served[static_cast<size_t>(it->second)] += images_[r].payload_bytes();
  }
  std::vector<uint64_t> budgets;
  for (size_t g = 0; g < served.size(); ++g) budgets.push_back(delta_pack_budget(served[g], area[g]));
  recorder_ = std::make_unique<DeltaRecorder>(std::move(budgets), context_.pinner);
}

DeviceDeltaCommit::~DeviceDeltaCommit() {
  if (live_check_.valid()) live_check_.wait();
  if (dense_sums_.valid()) dense_sums_.wait();  // it reads the images
}

std::vector<uint64_t> DeviceDeltaCommit::image_sums(PhaseLog& log, const char* phase) const {
  ScopedPhase timed(log, phase, Floor::HostMemcpy);
  std::vector<size_t> all(storages_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (size_t i : all) timed.add_bytes(bytes_[i]);
  return image_sums(all);
}

std::vector<uint64_t> DeviceDeltaCommit::image_sums(const std::vector<size_t>& flats) const {
  // Pieces of at most 32 MiB, 8-byte aligned within their storage, so one large storage spreads over the threads.
  constexpr uint64_t kPiece = 32ull << 20;
  struct Piece {
    size_t k, flat;
    uint64_t offset, bytes;
  };
  std::vector<Piece> pieces;
  for (size_t k = 0; k < flats.size(); ++k) {
    const size_t i = flats[k];
    for (uint64_t at = 0; at < bytes_[i]; at += kPiece) pieces.push_back({k, i, at, std::min(kPiece, bytes_[i] - at)});
  }
  std::unique_ptr<std::atomic<uint64_t>[]> sums(new std::atomic<uint64_t>[flats.size()]);
  for (size_t k = 0; k < flats.size(); ++k) sums[k] = 0;
  run_largest_first(
      pieces.size(), context_.threads, [&](size_t k) { return pieces[k].bytes; },
      [&](size_t k) {
        const Piece& p = pieces[k];
        const StorageIndex& s = storages_[p.flat];
        const auto bytes = images_[static_cast<size_t>(s.rank)].storage(s.index).subspan(p.offset, p.bytes);
        sums[p.k].fetch_add(digest64_sum(bytes, p.offset / 8), std::memory_order_relaxed);
      });
  std::vector<uint64_t> out(flats.size());
  for (size_t k = 0; k < flats.size(); ++k) out[k] = sums[k].load();
  return out;
}

double DeviceDeltaCommit::settle_dense_sums() {
  double waited = 0;
  if (dense_sums_.valid()) {
    const double start = steady_seconds();
    const std::vector<uint64_t> sums = dense_sums_.get();
    waited = steady_seconds() - start;
    for (size_t k = 0; k < dense_pending_.size(); ++k) sums_[dense_pending_[k]] = sums[k];
  } else if (!dense_pending_.empty()) {
    sums_known_ = false;  // recorded, never committed: those digests were never taken
  }
  dense_pending_.clear();
  return waited;
}

void DeviceDeltaCommit::before_native_load() { settle_dense_sums(); }

void DeviceDeltaCommit::on_native_load(bool images_hold_live, PhaseLog& log) {
  if (live_check_.valid()) live_check_.wait();  // a failed prepare's check still reads the staging areas
  settle_dense_sums();
  staged_.clear();
  packs_staged_ = false;
  live_known_ = images_hold_live;
  sums_known_ = false;
  if (recorder_ == nullptr) return;
  {
    // Outside any update: the first prepare's upload then times the copy alone, not the allocation of the area.
    ScopedPhase phase(log, "load.delta_staging");
    context_.live->reserve_delta_staging();
  }
  if (!images_hold_live) return;
  sums_ = image_sums(log, "load.delta_digest");
  sums_known_ = true;
}

DeltaRecorder* DeviceDeltaCommit::begin_writes(PhaseLog& log) {
  if (live_check_.valid()) live_check_.wait();  // a failed prepare's check, still running
  const bool had_dense = dense_sums_.valid();
  const double waited = settle_dense_sums();
  if (had_dense) log.add(PhaseRecord{"prepare.delta_digest_wait", waited, 0, Floor::None});
  live_check_ = {};
  staged_.clear();
  packs_staged_ = false;
  recording_ = recorder_ != nullptr && live_known_ && sums_known_;
  // From here on the images stop holding the live bytes, until a commit copies them over.
  live_known_ = false;
  sums_known_ = false;
  if (!recording_) return nullptr;
  base_sums_ = sums_;
  // The live storages do not change during a prepare (only a commit writes them), so their digests are taken on
  // the devices while the host folds.
  live_check_ = std::async(std::launch::async, [live = context_.live, list = storages_] {
    const double start = steady_seconds();
    LiveCheck check;
    check.digests = live->live_digests(list);
    check.seconds = steady_seconds() - start;
    return check;
  });
  std::vector<DeltaStorage> storages;
  for (size_t i = 0; i < storages_.size(); ++i) {
    const StorageIndex& s = storages_[i];
    storages.push_back(DeltaStorage{images_[static_cast<size_t>(s.rank)].storage(s.index),
                                    group_of_rank_[static_cast<size_t>(s.rank)],
                                    context_.live->delta_address(s.rank, s.index)});
  }
  recorder_->begin(std::move(storages));
  return recorder_.get();
}

void DeviceDeltaCommit::finish_writes(PhaseLog& log) {
  if (recorder_ == nullptr) return;
  if (!recording_) {
    // Nothing recorded: the images' digests come from the images, so that the next update can stage again.
    sums_ = image_sums(log, "prepare.delta_digest");
    sums_known_ = true;
    return;
  }
  recording_ = false;
  const size_t n = storages_.size();
  std::vector<DeltaChanges> changes;
  std::vector<bool> include(n, false);
  std::vector<StagedPack> packs;
  uint64_t pack_bytes_total = 0;
  {
    ScopedPhase phase(log, "prepare.delta_pack", Floor::HostMemcpy);
    changes = recorder_->finish();
    std::vector<size_t> uncovered;
    for (size_t i = 0; i < n; ++i) {
      // A storage some write reached without the recorder: its changes are unknown, so it is copied in full, and
      // its digest is taken from the image. A dense one is copied in full too; its digest is taken after the commit.
      if (changes[i].covered_bytes != bytes_[i]) {
        uncovered.push_back(i);
      } else if (changes[i].dense) {
        dense_pending_.push_back(i);
      } else {
        sums_[i] = changes[i].new_sum(base_sums_[i]);
      }
    }
    if (!uncovered.empty()) {
      const std::vector<uint64_t> sums = image_sums(uncovered);
      for (size_t k = 0; k < uncovered.size(); ++k) sums_[uncovered[k]] = sums[k];
    }
    sums_known_ = true;
    for (size_t i = 0; i < n; ++i) {
      include[i] = changes[i].changed() && !changes[i].incomplete && changes[i].covered_bytes == bytes_[i];
    }
    for (size_t g = 0; g < group_ids_.size(); ++g) {
      const std::optional<RecordedPack> pack = recorder_->pack(static_cast<int>(g), include);
      if (!pack) {  // out of room: this area's changed storages are copied in full
        for (size_t i = 0; i < n; ++i) {
          if (group_of_rank_[static_cast<size_t>(storages_[i].rank)] == static_cast<int>(g)) include[i] = false;
        }
        continue;
      }
      if (pack->segments == 0) continue;
      packs.push_back(StagedPack{group_ids_[g], pack->bytes, pack->digest});
      pack_bytes_total += pack->bytes.size();
    }
    phase.add_bytes(pack_bytes_total);
  }
  {
    // The packs are only right for the bytes they were recorded against: the live storages must hold them.
    LiveCheck check = live_check_.get();
    uint64_t total = 0;
    bool live_ok = true;
    for (size_t i = 0; i < n; ++i) {
      live_ok = live_ok && check.digests[i] == digest64_close(base_sums_[i], bytes_[i]);
      total += bytes_[i];
    }
    log.add(PhaseRecord{"prepare.delta_verify_live", check.seconds, total, Floor::None});
    if (!live_ok) return;  // full copy
  }
  {
    ScopedPhase phase(log, "prepare.delta_upload", Floor::H2D);
    context_.live->stage_packs(packs);
    phase.add_bytes(pack_bytes_total);
  }
  packs_staged_ = !packs.empty();
  // An unchanged storage needs no copy: the live check proved the device holds its bytes.
  staged_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    staged_[i] = include[i] || (!changes[i].changed() && changes[i].covered_bytes == bytes_[i]);
  }
}

void DeviceDeltaCommit::preflight() {
  rejected_ = false;
  if (packs_staged_ && !context_.live->staged_deltas_intact()) {
    staged_.clear();
    packs_staged_ = false;
    rejected_ = true;
  }
}

void DeviceDeltaCommit::commit(StorageTarget& storages, PhaseLog& log) {
  if (rejected_) ScopedPhase rejected(log, "commit.delta_rejected");
  if (packs_staged_) {
    ScopedPhase phase(log, "commit.delta_apply");
    storages.apply_staged_deltas();
  }
  {
    ScopedPhase phase(log, "commit.copy", storages.copy_floor());
    for (size_t r = 0, i = 0; r < images_.size(); ++r) {
      NvtxRange rank_range(fmt::format("commit.copy rank {}", r));
      for (size_t s = 0; s < images_[r].storage_count(); ++s, ++i) {
        if (!staged_.empty() && staged_[i]) continue;
        storages.write(static_cast<int>(r), s, 0, images_[r].storage(s));
        phase.add_bytes(bytes_[i]);
        fault_point(context_.fault_hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s,
                                          context_.layouts[r].storages[s].name});
      }
    }
    NvtxRange wait_range("commit.copy wait");
    storages.synchronize();
  }
  live_known_ = true;
  staged_.clear();
  packs_staged_ = false;
  if (!dense_pending_.empty()) {
    // The images are not written again before settle_dense_sums() (the next prepare or native load) collects it.
    dense_sums_ = std::async(std::launch::async, [this, flats = dense_pending_] { return image_sums(flats); });
  }
}

uint64_t DeviceDeltaCommit::host_bytes() const { return recorder_ ? recorder_->held_bytes() : 0; }

}  // namespace wsb
