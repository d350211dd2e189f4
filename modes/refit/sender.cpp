#include "modes/refit/sender.hpp"

#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

std::vector<std::vector<WireEntry>> plan_buckets(int rank, std::span<const ShardWeight> shard,
                                                 uint64_t bucket_size_bytes) {
  if (bucket_size_bytes == 0) fail_rank(ErrorKind::Mismatch, rank, "bucket_size_bytes must be > 0");
  std::vector<std::vector<WireEntry>> buckets;
  std::vector<WireEntry> current;
  uint64_t cursor = 0;
  for (const auto& w : shard) {
    const uint64_t bytes = w.spec.bytes();
    if (w.bytes.size() != bytes) {
      fail_rank(ErrorKind::Mismatch, rank,
                fmt::format("weight '{}' has {} B of data, its spec {} {} needs {} B", w.spec.name, w.bytes.size(),
                            dtype_name(w.spec.dtype), shape_string(w.spec.shape), bytes));
    }
    if (bytes > bucket_size_bytes) {
      fail_rank(ErrorKind::Mismatch, rank,
                fmt::format("weight '{}' of {} B does not fit in a bucket of {} B", w.spec.name, bytes,
                            bucket_size_bytes));
    }
    uint64_t offset = (cursor + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
    if (!current.empty() && offset + bytes > bucket_size_bytes) {
      buckets.push_back(std::move(current));
      current.clear();
      offset = 0;
    }
    current.push_back(WireEntry{.spec = w.spec, .offset = offset, .bytes = bytes});
    cursor = offset + bytes;
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
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
