// cpu mode, commit strategy "device-delta" (modes/sync/staged_delta.hpp): the prepare side (diff, live-digest
// check, staging within the budget) and the commit side (apply the staged changes, copy the rest in full).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "core/nvtx.hpp"
#include "modes/cpu/cpu_mode.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

void CpuMode::stage_device_delta(uint32_t, PhaseLog& log) {
  StorageTarget* live = context_.live;
  // Without known live bytes (first update after a load that was not staged in the images) or a staging area,
  // the commit copies every storage in full, which is always exact.
  if (!live_known_ || prepared_set_ == live_set_ || live == nullptr || live->delta_staging_bytes(0) == 0) return;
  const std::vector<RankImage>& before = sets_[live_set_];
  const std::vector<RankImage>& after = sets_[prepared_set_];
  std::vector<std::pair<int, size_t>> items;
  for (size_t r = 0; r < after.size(); ++r) {
    for (size_t s = 0; s < after[r].storage_count(); ++s) items.emplace_back(static_cast<int>(r), s);
  }
  const size_t n = items.size();
  std::vector<StorageDelta> deltas(n);
  std::vector<uint64_t> digests(n), changed(n);
  std::unique_ptr<bool[]> eligible(new bool[n]());
  uint64_t total = 0;
  {
    ScopedPhase phase(log, "prepare.delta_diff", Floor::HostMemcpy);
    auto bytes_of = [&](size_t i) { return after[items[i].first].storage(items[i].second).size(); };
    run_largest_first(n, context_.threads, bytes_of, [&](size_t i) {
      const auto [r, s] = items[i];
      const auto a = before[r].storage(s);
      const auto b = after[r].storage(s);
      deltas[i].rank = r;
      deltas[i].index = s;
      deltas[i].storage_bytes = a.size();
      if (a.size() % 4 != 0 || a.size() / 4 > UINT32_MAX) {  // not word-addressable: copied in full
        digests[i] = digest64(a);
        return;
      }
      const auto max_entries = static_cast<uint64_t>(kDenseLimit * static_cast<double>(a.size()) / 8);
      digests[i] = diff_storage(a, b, max_entries, deltas[i], &changed[i]);
      eligible[i] = changed[i] <= max_entries;
    });
    for (size_t i = 0; i < n; ++i) total += bytes_of(i);
    phase.add_bytes(2 * total);  // both image sets are read
  }
  {
    // The delta is only right for the bytes it was computed from: the live storages must hold the live image.
    ScopedPhase phase(log, "prepare.delta_verify_live", Floor::None, total);
    for (size_t i = 0; i < n; ++i) {
      if (live->live_digest(items[i].first, items[i].second) != digests[i]) return;  // full copy
    }
  }
  // Within each staging area's budget, the sparsest storages first: they save the most copy per staged byte.
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i) {
    if (eligible[i]) groups[live->delta_staging_group(items[i].first)].push_back(i);
  }
  std::vector<const StorageDelta*> selected;
  std::vector<bool> staged(n, false);
  for (auto& [group, members] : groups) {
    std::stable_sort(members.begin(), members.end(), [&](size_t x, size_t y) {
      return deltas[x].staged_bytes() * deltas[y].storage_bytes < deltas[y].staged_bytes() * deltas[x].storage_bytes;
    });
    const uint64_t capacity = live->delta_staging_bytes(items[members.front()].first);
    uint64_t used = 16;  // the pack header
    for (size_t i : members) {
      if (used + deltas[i].staged_bytes() > capacity) continue;
      used += deltas[i].staged_bytes();
      selected.push_back(&deltas[i]);
      staged[i] = true;
    }
  }
  {
    ScopedPhase phase(log, "prepare.delta_upload", Floor::H2D);
    live->stage_deltas(selected);
    phase.add_bytes(pack_bytes(selected));
  }
  staged_ = std::move(staged);
}

void CpuMode::commit_device_delta(StorageTarget& storages, PhaseLog& log) {
  const std::vector<RankImage>& images = sets_[prepared_set_];
  if (delta_rejected_) ScopedPhase rejected(log, "commit.delta_rejected");
  if (!staged_.empty()) {
    ScopedPhase phase(log, "commit.delta_apply");
    storages.apply_staged_deltas();
  }
  {
    ScopedPhase phase(log, "commit.copy", storages.copy_floor());
    size_t i = 0;
    for (size_t r = 0; r < images.size(); ++r) {
      NvtxRange rank_range(fmt::format("commit.copy rank {}", r));
      for (size_t s = 0; s < images[r].storage_count(); ++s, ++i) {
        if (!staged_.empty() && staged_[i]) continue;
        storages.write(static_cast<int>(r), s, 0, images[r].storage(s));
        phase.add_bytes(images[r].storage(s).size());
        fault_point(context_.fault_hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s,
                                          context_.layouts[r].storages[s].name});
      }
    }
    NvtxRange wait_range("commit.copy wait");
    storages.synchronize();
  }
  live_set_ = prepared_set_;
  live_known_ = true;
  staged_.clear();
}

}  // namespace wsb
