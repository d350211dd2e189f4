#pragma once
// What each sender rank streams in a refit: for every canonical tensor, in canonical order, the slice that engine
// TP rank r needs (the bounding slice of the fragments its runtime storages take from that tensor, or the whole
// tensor when they slice along different dims or take nothing). Sender rank r owns exactly these shards, so rank
// streams differ in size (k/v replication, uneven slices) and their bucket boundaries differ.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/layout/fragment_runs.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/refit/refit_layout.hpp"

namespace wsb::refit {

/// One rank's shard of one canonical tensor: the slice [start, start + length) along `dim` of the tensor
/// (row-major; the slice rule of Fragment), and its spec (canonical name, dtype, slice shape) as the stream carries it.
struct ShardSlice {
  TensorSpec spec;        ///< name = canonical tensor name, shape = slice shape
  Fragment slice;         ///< the slice of the canonical tensor (canonical_shape = the full tensor's)
  FragmentRun run;        ///< slice bytes as runs of the canonical tensor (dst_offset 0)
  /// True when the shard is one contiguous run of the canonical tensor (a leading-dim slice or the whole tensor),
  /// so a sender can stream it without copying.
  bool contiguous() const { return run.outer <= 1; }
};

/// shards[r][i]: rank r's shard of canonical tensor i.
using RankShards = std::vector<std::vector<ShardSlice>>;

/// Shards of every rank of `layouts` over `canonical` (the profile's tensors, canonical order). Throws
/// Error(Mismatch) naming the storage when a fragment names a tensor outside `canonical` or does not fit it.
RankShards plan_rank_shards(const std::vector<TensorSpec>& canonical, const std::vector<RankLayout>& layouts);

/// Returns `bucket` when every shard of every rank fits in it (the senders never split a weight). Otherwise throws
/// Error(Mismatch) naming the largest shard of any rank (its bytes are the smallest bucket that works), e.g.
/// "refit mode: bucket_size_bytes 4096 B is smaller than weight 'w' (65536 B on rank 0, the largest weight of any
/// rank); use a bucket of at least 65536 B".
uint64_t check_bucket_fits(uint64_t bucket, const RankShards& shards);

/// The receivers' expectation for `shards`: names in canonical order, rank r's spec of each its shard's spec.
RefitLayout refit_layout(const RankShards& shards);

/// `storage` (of rank `rank`) with each fragment rebased onto that rank's shard of its tensor: canonical_shape the
/// shard's shape, start relative to the shard. The ordinary loader run on the rebased spec over shard bytes writes
/// exactly what it writes for `storage` over the canonical tensors. `canonical_index(name)` is the tensor's index.
RuntimeStorageSpec rebase_on_shards(const RuntimeStorageSpec& storage, const std::vector<ShardSlice>& rank_shards,
                                    const std::function<size_t(const std::string&)>& canonical_index);

}  // namespace wsb::refit
