#include "modes/refit/rank_applier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

RankApplier::RankApplier(int rank, const RankLayout& layout, const std::vector<ShardSlice>& shards,
                         const std::function<size_t(const std::string&)>& canonical_index)
    : rank_(rank), shards_(shards), weights_(shards.size()) {
  uint64_t stash = 0;
  for (size_t s = 0; s < layout.storages.size(); ++s) {
    Storage st;
    st.local = rebase_on_shards(layout.storages[s], shards, canonical_index);
    const std::vector<FragmentRun> runs = fragment_runs(st.local);
    st.plain = !runs.empty();
    for (const Fragment& f : st.local.fragments) {
      const size_t w = canonical_index(f.canonical);
      if (std::find(st.weights.begin(), st.weights.end(), w) == st.weights.end()) st.weights.push_back(w);
    }
    if (st.plain) {
      for (size_t w : st.weights) weights_[w].plain_storages.push_back(s);
      for (size_t k = 0; k < runs.size(); ++k) {
        weights_[canonical_index(st.local.fragments[k].canonical)].placements.push_back(Target{s, runs[k]});
      }
    } else {
      for (size_t w : st.weights) {
        Weight& weight = weights_[w];
        weight.dependents.push_back(s);
        if (!weight.stash_offset) {
          stash = align_up(stash, kStorageAlignment);
          weight.stash_offset = stash;
          stash += shards_[w].spec.bytes();
        }
      }
    }
    storages_.push_back(std::move(st));
  }
  if (stash > 0) stash_ = HostBuffer(stash, kImageAlignment);
}

void RankApplier::begin(RankImage& image) {
  image_ = &image;
  for (Storage& st : storages_) st.pending = st.weights.size();
  for (Weight& w : weights_) w.arrived = false;
}

void RankApplier::apply(size_t index, std::span<const uint8_t> bytes) {
  const ArrivedWeight weight{index, bytes};
  apply_batch({&weight, 1}, nullptr);
}

void RankApplier::apply_batch(std::span<const ArrivedWeight> weights, WorkPool* pool, uint64_t min_piece) {
  if (image_ == nullptr) fail_rank(ErrorKind::State, rank_, "weight applied outside a refit");
  uint64_t total = 0;
  for (const ArrivedWeight& a : weights) {
    if (a.index >= weights_.size()) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("weight index {} is beyond the model's {}", a.index, weights_.size()));
    }
    const ShardSlice& shard = shards_[a.index];
    Weight& w = weights_[a.index];
    if (w.arrived) fail_rank(ErrorKind::State, rank_, fmt::format("weight '{}' arrived twice", shard.spec.name));
    if (a.bytes.size() != shard.spec.bytes()) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("weight '{}' arrived with {} B, its shard {} {} has {} B", shard.spec.name, a.bytes.size(),
                            dtype_name(shard.spec.dtype), shape_string(shard.spec.shape), shard.spec.bytes()));
    }
    w.arrived = true;
    total += a.bytes.size();
  }
  // The copies, in pieces of whole weights' byte ranges: each piece places its range into every storage the weight
  // feeds (disjoint bytes: a run maps each weight byte to one storage byte) and keeps it in the stash.
  struct Piece {
    size_t weight;  // into `weights`
    uint64_t from, to;
  };
  std::vector<Piece> pieces;
  const uint64_t piece = pool == nullptr ? std::max<uint64_t>(total, 1) : piece_bytes(total, pool->threads(), min_piece);
  for (size_t k = 0; k < weights.size(); ++k) {
    const uint64_t n = weights[k].bytes.size();
    for (uint64_t from = 0; from < n; from += piece) pieces.push_back(Piece{k, from, std::min(n, from + piece)});
  }
  const auto copy = [&](size_t i) {
    const Piece& p = pieces[i];
    const ArrivedWeight& a = weights[p.weight];
    const Weight& w = weights_[a.index];
    for (const Target& t : w.placements) place_piece(t, a.bytes, p.from, p.to);
    if (w.stash_offset) copy_streaming(stash_.data() + *w.stash_offset + p.from, a.bytes.data() + p.from, p.to - p.from);
  };
  if (pool != nullptr) {
    pool->run(pieces.size(), copy);
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) copy(i);
  }
  std::vector<size_t> complete;  // transform storages whose last weight is in this batch
  for (const ArrivedWeight& a : weights) {
    const Weight& w = weights_[a.index];
    for (size_t s : w.dependents) {
      if (--storages_[s].pending == 0) complete.push_back(s);
    }
    for (size_t s : w.plain_storages) --storages_[s].pending;
  }
  if (pool != nullptr) {
    pool->run(complete.size(), [&](size_t i) { load_from_stash(complete[i]); });
  } else {
    for (size_t s : complete) load_from_stash(s);
  }
}

void RankApplier::place_piece(const Target& t, std::span<const uint8_t> bytes, uint64_t from, uint64_t to) {
  const FragmentRun& run = t.run;
  if (run.outer == 1 || run.stride == run.block) {
    // One contiguous run (a whole weight, or whole rows of it): a streaming copy of the piece's overlap with it.
    const uint64_t lo = std::max(from, run.src_first), hi = std::min(to, run.src_first + run.outer * run.block);
    if (lo < hi) {
      uint8_t* dst = image_->storage(t.storage).data() + run.dst_offset + (lo - run.src_first);
      copy_streaming(dst, bytes.data() + lo, hi - lo);
    }
    return;
  }
  place_run_range(run, bytes, from, to, image_->storage(t.storage));
}

void RankApplier::load_from_stash(size_t storage) {
  const Storage& st = storages_[storage];
  const CanonicalLookup lookup = [&](const std::string& name) -> std::span<const uint8_t> {
    for (size_t w : st.weights) {
      if (shards_[w].spec.name == name) {
        return std::span<const uint8_t>(stash_.data() + *weights_[w].stash_offset, shards_[w].spec.bytes());
      }
    }
    fail_rank(ErrorKind::Missing, rank_, fmt::format("storage '{}' needs weight '{}'", st.local.name, name));
  };
  load_storage(st.local, lookup, image_->storage(storage));
}

void RankApplier::finish() {
  if (image_ == nullptr) fail_rank(ErrorKind::State, rank_, "refit finished before it began");
  image_ = nullptr;
  for (const Storage& st : storages_) {
    if (st.pending == 0) continue;
    for (size_t w : st.weights) {
      if (!weights_[w].arrived) {
        fail_rank(ErrorKind::Missing, rank_,
                  fmt::format("storage '{}' did not receive weight '{}'", st.local.name, shards_[w].spec.name));
      }
    }
  }
}

}  // namespace wsb::refit
