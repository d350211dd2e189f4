#pragma once
// Sender side of the refit mode (trainer simulator): sender rank r owns a shard (the weights TP rank r needs, in
// the global weight order) and packs them, in order, into buckets of bucket_size_bytes: each entry carries
// (name, dtype, shape, bytes) and starts at a kEntryAlignment-aligned offset; a bucket is closed when the next
// weight would not fit. Buckets may mix dtypes. A weight larger than a bucket is refused (no splitting yet).
#include <cstdint>
#include <span>
#include <vector>

#include "modes/refit/bucket.hpp"
#include "modes/refit/rank_shards.hpp"
#include "modes/refit/transport.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

/// One weight of a sender shard: its spec and its bytes (spec.bytes() of them, borrowed).
struct ShardWeight {
  TensorSpec spec;
  std::span<const uint8_t> bytes;
};

/// Bucket boundaries of `shard` for `bucket_size_bytes`: entries per bucket, in shard order, offsets aligned.
/// Throws Error(Mismatch, "refit: rank R: weight 'W' ...") when a weight's byte span differs from its spec or a
/// weight is larger than a bucket, and when bucket_size_bytes is 0.
std::vector<std::vector<WireEntry>> plan_buckets(int rank, std::span<const ShardWeight> shard,
                                                 uint64_t bucket_size_bytes);

/// What one sender rank streams in a refit: buckets sent and payload bytes (the weights' bytes, alignment gaps
/// excluded), as stream_shard sends them.
struct RankStreamPlan {
  uint64_t buckets = 0;
  uint64_t bytes = 0;
  bool operator==(const RankStreamPlan&) const = default;
};

/// Per sender rank, the buckets and bytes of `shards` packed into buckets of `bucket_size_bytes` (plan_buckets'
/// boundaries). Throws what plan_buckets throws (a weight larger than a bucket, a bucket of 0).
std::vector<RankStreamPlan> plan_rank_streams(const RankShards& shards, uint64_t bucket_size_bytes);

/// The bucket size a refit uses: `requested` when non-zero, else the largest shard of any rank rounded up to MiB, at
/// least 64 MiB (one bucket holds any weight, and buckets stay large enough to amortize a hand-off), but at most the
/// largest rank's whole stream rounded up to MiB (bytes; a tiny model needs no 64 MiB buffers).
uint64_t refit_bucket_bytes(uint64_t requested, const RankShards& shards);

/// How a sender rank packs and sends.
struct SendOptions {
  /// Splits each bucket's packing copies across its threads (null: this thread copies alone).
  WorkPool* pack_pool = nullptr;
  /// Payload buffers to pack into when the transport has no spare one, before a fresh allocation (a trainer's
  /// buffers, allocated and faulted in once rather than in every refit). Taken from, never given back to here.
  std::vector<std::vector<uint8_t>>* buffers = nullptr;
  /// A thread of this rank's own sends bucket k while bucket k + 1 is packed (one more buffer in flight): for
  /// transports whose send() itself copies (shared-memory slots). Unused by a transport with a filled path
  /// (SenderEndpoint::send_filled: device rings), which overlaps packing and copying itself.
  bool send_ahead = false;
};

/// Packs `shard` into buckets of `bucket_size_bytes` and sends them on transport.sender(rank), then finish(). Each
/// bucket goes through the endpoint's filled path when it has one (send_filled: packed straight into the
/// transport's staging memory across `pack_pool`), else packed into a payload buffer and sent.
/// Setup refuses a bucket size different from the transport's (check_bucket_sizes) before sending anything.
/// On any error the channel is failed with the error text (so the receiver raises it, never waits) and the error
/// rethrown.
void stream_shard(int rank, std::span<const ShardWeight> shard, uint64_t bucket_size_bytes, Transport& transport,
                  const SendOptions& options = {});

/// Packs the weights of one planned bucket (`entries`, from plan_buckets; `weights[k]` is entry k's bytes) into
/// `payload` (resized to the bucket's payload bytes), alignment gaps zeroed, in pieces of at least `min_piece` bytes
/// of the bucket (piece_bytes) across `pool` (may be null).
void pack_bucket(std::span<const WireEntry> entries, std::span<const ShardWeight> weights, std::vector<uint8_t>& payload,
                 WorkPool* pool, uint64_t min_piece = uint64_t{1} << 20);

}  // namespace wsb::refit
