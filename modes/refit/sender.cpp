#include "modes/refit/sender.hpp"

#include <algorithm>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"
#include "modes/sync/host_buffer.hpp"

namespace wsb::refit {

namespace {

/// plan_buckets over specs only (the byte spans already checked).
std::vector<std::vector<WireEntry>> plan_specs(int rank, std::span<const TensorSpec> specs,
                                               uint64_t bucket_size_bytes) {
  if (bucket_size_bytes == 0) fail_rank(ErrorKind::Mismatch, rank, "bucket_size_bytes must be > 0");
  std::vector<std::vector<WireEntry>> buckets;
  std::vector<WireEntry> current;
  uint64_t cursor = 0;
  for (const TensorSpec& spec : specs) {
    const uint64_t bytes = spec.bytes();
    if (bytes > bucket_size_bytes) {
      fail_rank(ErrorKind::Mismatch, rank,
                fmt::format("weight '{}' of {} B does not fit in a bucket of {} B", spec.name, bytes,
                            bucket_size_bytes));
    }
    uint64_t offset = (cursor + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
    if (!current.empty() && offset + bytes > bucket_size_bytes) {
      buckets.push_back(std::move(current));
      current.clear();
      offset = 0;
    }
    current.push_back(WireEntry{.spec = spec, .offset = offset, .bytes = bytes});
    cursor = offset + bytes;
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace

std::vector<std::vector<WireEntry>> plan_buckets(int rank, std::span<const ShardWeight> shard,
                                                 uint64_t bucket_size_bytes) {
  std::vector<TensorSpec> specs;
  specs.reserve(shard.size());
  for (const auto& w : shard) {
    if (w.bytes.size() != w.spec.bytes()) {
      fail_rank(ErrorKind::Mismatch, rank,
                fmt::format("weight '{}' has {} B of data, its spec {} {} needs {} B", w.spec.name, w.bytes.size(),
                            dtype_name(w.spec.dtype), shape_string(w.spec.shape), w.spec.bytes()));
    }
    specs.push_back(w.spec);
  }
  return plan_specs(rank, specs, bucket_size_bytes);
}

std::vector<RankStreamPlan> plan_rank_streams(const RankShards& shards, uint64_t bucket_size_bytes) {
  std::vector<RankStreamPlan> out;
  for (size_t r = 0; r < shards.size(); ++r) {
    std::vector<TensorSpec> specs;
    for (const ShardSlice& s : shards[r]) specs.push_back(s.spec);
    RankStreamPlan plan;
    for (const auto& bucket : plan_specs(static_cast<int>(r), specs, bucket_size_bytes)) {
      ++plan.buckets;
      for (const WireEntry& e : bucket) plan.bytes += e.bytes;
    }
    out.push_back(plan);
  }
  return out;
}

uint64_t refit_bucket_bytes(uint64_t requested, const RankShards& shards) {
  constexpr uint64_t kMiB = 1ull << 20;
  if (requested != 0) return requested;
  uint64_t largest = 0;
  for (const auto& rank : shards) {
    for (const ShardSlice& s : rank) largest = std::max(largest, s.spec.bytes());
  }
  return std::max(64 * kMiB, align_up(largest, kMiB));
}

void stream_shard(int rank, std::span<const ShardWeight> shard, uint64_t bucket_size_bytes, Transport& transport) {
  SenderEndpoint& out = transport.sender(rank);
  try {
    check_bucket_sizes(bucket_size_bytes, transport.bucket_size_bytes());
    const auto plan = plan_buckets(rank, shard, bucket_size_bytes);
    size_t next = 0;
    for (const auto& entries : plan) {
      Bucket bucket;
      bucket.payload = out.spare_payload();  // an earlier bucket's buffer when the transport has one
      bucket.payload.resize(entries.back().offset + entries.back().bytes);
      uint64_t cursor = 0;
      for (const auto& e : entries) {
        const auto& w = shard[next++];
        // The alignment gaps are zeroed: a recycled buffer still holds the previous bucket's bytes.
        if (e.offset > cursor) std::memset(bucket.payload.data() + cursor, 0, e.offset - cursor);
        if (e.bytes != 0) std::memcpy(bucket.payload.data() + e.offset, w.bytes.data(), e.bytes);
        cursor = e.offset + e.bytes;
      }
      bucket.entries = entries;
      out.send(std::move(bucket));
    }
    out.finish();
  } catch (const std::exception& e) {
    out.fail(e.what());
    throw;
  }
}

}  // namespace wsb::refit
