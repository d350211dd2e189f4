#include "modes/refit/trainer_sim.hpp"

#include "models/layout/fragment_runs.hpp"
#include "modes/sync/rank_image.hpp"

namespace wsb::refit {

TrainerSim::TrainerSim(const ModelProfile& profile, const RankShards& shards, HostMemory memory)
    : shards_(shards), image_(profile, "refit trainer", memory), cut_(shards.size()), cut_offsets_(shards.size()) {
  for (size_t r = 0; r < shards_.size(); ++r) {
    uint64_t cursor = 0;
    cut_offsets_[r].assign(shards_[r].size(), 0);
    for (size_t i = 0; i < shards_[r].size(); ++i) {
      if (shards_[r][i].contiguous()) continue;
      cursor = align_up(cursor, kStorageAlignment);
      cut_offsets_[r][i] = cursor;
      cursor += shards_[r][i].spec.bytes();
    }
    if (cursor > 0) cut_[r] = HostBuffer(cursor, kImageAlignment, nullptr, memory);
  }
}

std::vector<const HostBuffer*> TrainerSim::buffers() const {
  std::vector<const HostBuffer*> out{&image_.buffer()};
  for (const HostBuffer& b : cut_) {
    if (b.size() > 0) out.push_back(&b);
  }
  return out;
}

void TrainerSim::load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) {
  cut_valid_ = false;
  image_.load(checkpoint, version, log);
}

void TrainerSim::advance(const std::filesystem::path& store, uint32_t target, int threads, PhaseLog& log,
                         const std::function<void()>& before_mutation) {
  if (image_.version() != target) {
    image_.advance(store, target, threads, log, "prepare.trainer", [&] {
      cut_valid_ = false;
      if (before_mutation) before_mutation();
    });
  } else if (before_mutation) {
    before_mutation();
  }
  if (!cut_valid_) cut_shards(log);
}

void TrainerSim::cut_shards(PhaseLog& log) {
  ScopedPhase phase(log, "prepare.trainer.shard", Floor::HostMemcpy);
  for (size_t r = 0; r < shards_.size(); ++r) {
    for (size_t i = 0; i < shards_[r].size(); ++i) {
      const ShardSlice& s = shards_[r][i];
      if (s.contiguous()) continue;
      const auto src = image_.tensor(i);
      place_run_range(s.run, src, 0, src.size(), cut_[r].span().subspan(cut_offsets_[r][i], s.spec.bytes()));
      phase.add_bytes(s.spec.bytes());
    }
  }
  cut_valid_ = true;
}

std::vector<ShardWeight> TrainerSim::rank_weights(int rank) const {
  const auto r = static_cast<size_t>(rank);
  std::vector<ShardWeight> out;
  out.reserve(shards_[r].size());
  for (size_t i = 0; i < shards_[r].size(); ++i) {
    const ShardSlice& s = shards_[r][i];
    std::span<const uint8_t> bytes = s.contiguous()
                                         ? image_.tensor(i).subspan(s.run.src_first, s.spec.bytes())
                                         : cut_[r].span().subspan(cut_offsets_[r][i], s.spec.bytes());
    out.push_back(ShardWeight{s.spec, bytes});
  }
  return out;
}

uint64_t TrainerSim::shard_bytes() const {
  uint64_t total = 0;
  for (const auto& b : cut_) total += b.size();
  return total;
}

}  // namespace wsb::refit
