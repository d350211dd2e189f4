#include "modes/refit/rank_shards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/errors.hpp"

namespace wsb::refit {
namespace {

Fragment whole(const TensorSpec& t) {
  Fragment f;
  f.canonical = t.name;
  f.canonical_shape = t.shape;
  f.dim = 0;
  f.start = 0;
  f.length = t.shape.empty() ? 1 : t.shape[0];
  return f;
}

ShardSlice make_slice(const TensorSpec& t, Fragment slice) {
  RuntimeStorageSpec carrier;  // fragment_run needs only the dtype and a name for its messages
  carrier.name = "refit shard of " + t.name;
  carrier.dtype = t.dtype;
  ShardSlice s;
  s.run = fragment_run(carrier, slice);
  s.spec = TensorSpec{t.name, t.dtype, t.shape.empty() ? Shape{} : slice.shape()};
  s.slice = std::move(slice);
  return s;
}

}  // namespace

RankShards plan_rank_shards(const std::vector<TensorSpec>& canonical, const std::vector<RankLayout>& layouts) {
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < canonical.size(); ++i) index[canonical[i].name] = i;
  RankShards shards(layouts.size());
  for (size_t r = 0; r < layouts.size(); ++r) {
    // Per tensor: the fragments rank r takes from it.
    std::vector<std::vector<const Fragment*>> taken(canonical.size());
    for (const RuntimeStorageSpec& storage : layouts[r].storages) {
      for (const Fragment& f : storage.fragments) {
        auto it = index.find(f.canonical);
        if (it == index.end()) {
          throw Error(ErrorKind::Mismatch, fmt::format("refit: storage '{}' of rank {} takes tensor '{}', which the "
                                                       "model does not have",
                                                       storage.name, r, f.canonical));
        }
        if (f.canonical_shape != canonical[it->second].shape) {
          throw Error(ErrorKind::Mismatch,
                      fmt::format("refit: storage '{}' of rank {} sees tensor '{}' as {}, the model has {}",
                                  storage.name, r, f.canonical, shape_string(f.canonical_shape),
                                  shape_string(canonical[it->second].shape)));
        }
        fragment_run(storage, f);  // throws naming the storage when the slice does not fit the tensor
        taken[it->second].push_back(&f);
      }
    }
    for (size_t i = 0; i < canonical.size(); ++i) {
      const TensorSpec& t = canonical[i];
      const auto& frags = taken[i];
      const bool one_dim = !frags.empty() && !t.shape.empty() &&
                           std::all_of(frags.begin(), frags.end(), [&](const Fragment* f) { return f->dim == frags[0]->dim; });
      if (!one_dim) {
        shards[r].push_back(make_slice(t, whole(t)));
        continue;
      }
      int64_t lo = frags[0]->start, hi = frags[0]->start + frags[0]->length;
      for (const Fragment* f : frags) {
        lo = std::min(lo, f->start);
        hi = std::max(hi, f->start + f->length);
      }
      Fragment slice;
      slice.canonical = t.name;
      slice.canonical_shape = t.shape;
      slice.dim = frags[0]->dim;
      slice.start = lo;
      slice.length = hi - lo;
      shards[r].push_back(make_slice(t, std::move(slice)));
    }
  }
  return shards;
}

uint64_t check_bucket_fits(uint64_t bucket, const RankShards& shards) {
  // The largest, not the first, shard is named: its size is the bucket that works, so one retry suffices.
  const ShardSlice* largest = nullptr;
  size_t largest_rank = 0;
  for (size_t r = 0; r < shards.size(); ++r) {
    for (const ShardSlice& s : shards[r]) {
      if (largest == nullptr || s.spec.bytes() > largest->spec.bytes()) {
        largest = &s;
        largest_rank = r;
      }
    }
  }
  if (largest != nullptr && largest->spec.bytes() > bucket) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit mode: bucket_size_bytes {} B is smaller than weight '{}' ({} B on rank {}, the "
                            "largest weight of any rank); use a bucket of at least {} B",
                            bucket, largest->spec.name, largest->spec.bytes(), largest_rank, largest->spec.bytes()));
  }
  return bucket;
}

RefitLayout refit_layout(const RankShards& shards) {
  std::vector<std::vector<TensorSpec>> specs(shards.size());
  for (size_t r = 0; r < shards.size(); ++r) {
    for (const ShardSlice& s : shards[r]) specs[r].push_back(s.spec);
  }
  return RefitLayout(std::move(specs));
}

RuntimeStorageSpec rebase_on_shards(const RuntimeStorageSpec& storage, const std::vector<ShardSlice>& rank_shards,
                                    const std::function<size_t(const std::string&)>& canonical_index) {
  RuntimeStorageSpec local = storage;
  for (Fragment& f : local.fragments) {
    const ShardSlice& shard = rank_shards.at(canonical_index(f.canonical));
    f.canonical_shape = shard.spec.shape;
    if (shard.spec.shape.empty()) continue;  // a scalar is sent whole
    if (shard.slice.dim == f.dim) f.start -= shard.slice.start;
    // Otherwise the shard is the whole tensor (slice [0, extent) of dim 0): the fragment stays as it is.
  }
  return local;
}

}  // namespace wsb::refit
