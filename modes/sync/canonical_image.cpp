#include "modes/sync/canonical_image.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "core/errors.hpp"
#include "models/checkpoint/mapped_copy.hpp"
#include "publication/publication.hpp"
#include "publication/store.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

CanonicalImage::CanonicalImage(const ModelProfile& profile, std::string owner, HostMemory memory,
                               std::vector<std::span<uint8_t>> homes)
    : owner_(std::move(owner)), tensors_(profile.canonical_tensors()), homes_(std::move(homes)) {
  if (homes_.empty()) homes_.resize(tensors_.size());
  if (homes_.size() != tensors_.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("{}: {} tensor homes for {} canonical tensors", owner_, homes_.size(),
                                                 tensors_.size()));
  }
  uint64_t cursor = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    index_[tensors_[i].name] = i;
    const std::span<uint8_t> home = homes_[i];
    if (home.data() != nullptr) {
      // The fold's vector loops expect every tensor as aligned as the buffer would place it.
      if (home.size() != tensors_[i].bytes() || reinterpret_cast<uintptr_t>(home.data()) % kStorageAlignment != 0) {
        throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' ({} B) cannot live in a home of {} B at {}",
                                                     owner_, tensors_[i].name, tensors_[i].bytes(), home.size(),
                                                     static_cast<const void*>(home.data())));
      }
      offsets_.push_back(0);
      continue;
    }
    cursor = align_up(cursor, kStorageAlignment);
    offsets_.push_back(cursor);
    cursor += tensors_[i].bytes();
  }
  buffer_ = HostBuffer(cursor, kImageAlignment, nullptr, memory);
}

std::optional<size_t> CanonicalImage::index_of(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::span<uint8_t> CanonicalImage::tensor(size_t index) {
  if (homes_[index].data() != nullptr) return homes_[index];
  return buffer_.span().subspan(offsets_[index], tensors_[index].bytes());
}

std::span<const uint8_t> CanonicalImage::tensor(size_t index) const {
  if (homes_[index].data() != nullptr) return homes_[index];
  return buffer_.span().subspan(offsets_[index], tensors_[index].bytes());
}

std::span<const uint8_t> CanonicalImage::tensor(const std::string& name) const {
  const auto index = index_of(name);
  if (!index) throw Error(ErrorKind::Missing, fmt::format("{}: no tensor '{}'", owner_, name));
  return tensor(*index);
}

void CanonicalImage::load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log,
                          const std::vector<bool>& present) {
  ScopedPhase phase(log, "load.canonical_image", Floor::HostMemcpy);
  loaded_ = false;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& spec = tensors_[i];
    expect_tensor(checkpoint, spec, checkpoint.dir().string());
    if (i < present.size() && present[i] && homes_[i].data() != nullptr) continue;
    auto src = checkpoint.data(spec.name);
    // Released as it is copied: the mapped pages of the largest tensor (an embedding of gigabytes) would otherwise
    // sit on top of everything the native load allocated, as the peak of the engine's resident set.
    copy_from_mapping(src, tensor(i));
    checkpoint.release(spec.name);  // the pages shared with its neighbours too
    phase.add_bytes(src.size());
  }
  version_ = version;
  loaded_ = true;
}

void CanonicalImage::advance(const std::filesystem::path& store_dir, uint32_t target, int threads, PhaseLog& log,
                             std::string_view phase_prefix, const std::function<void()>& before_mutation,
                             const FoldListener& listener) {
  if (!loaded_) throw Error(ErrorKind::State, fmt::format("{}: prepare before the engine's native load", owner_));
  if (target <= version_) {
    throw Error(ErrorKind::State, fmt::format("{}: the canonical image holds {}, not older than target {}", owner_,
                                              version_string(version_), version_string(target)));
  }
  Store store(store_dir);
  UpdatePlan plan;
  {
    ScopedPhase phase(log, fmt::format("{}.plan", phase_prefix));
    plan = plan_update(store, version_, target);
    check_plan_covers(plan, tensors_);
  }
  if (before_mutation) before_mutation();
  {
    // Stage the compressed deltas once: fault every payload page in (they are memory-mapped).
    ScopedPhase phase(log, fmt::format("{}.stage", phase_prefix), Floor::DiskRead);
    uint64_t sink = 0;
    for (const auto& step : plan.steps) {
      for (const auto& spec : tensors_) {
        auto payload = step->payload(spec.name);
        for (size_t i = 0; i < payload.size(); i += 4096) sink += payload[i];
        phase.add_bytes(payload.size());
      }
    }
    volatile uint64_t keep = sink;
    (void)keep;
  }
  ScopedPhase phase(log, fmt::format("{}.apply_verify", phase_prefix), Floor::HostMemcpy);
  std::vector<FoldTarget> targets;
  targets.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) targets.push_back(FoldTarget{&tensors_[i], tensor(i)});
  try {
    fold_in_parallel(plan, targets, threads, workspace_, listener);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::State) loaded_ = false;  // the tensors could not be put back
    throw;
  }
  for (const auto& spec : tensors_) phase.add_bytes(spec.bytes());
  version_ = target;
}

}  // namespace wsb
