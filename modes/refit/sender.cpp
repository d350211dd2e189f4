#include "modes/refit/sender.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

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
  uint64_t largest_rank = 0;  // a rank's whole stream in one bucket, entries at their wire alignment
  for (const auto& rank : shards) {
    uint64_t stream = 0;
    for (const ShardSlice& s : rank) {
      largest = std::max(largest, s.spec.bytes());
      stream = align_up(stream, kEntryAlignment) + s.spec.bytes();
    }
    largest_rank = std::max(largest_rank, stream);
  }
  // Never larger than one rank's whole stream: a small model gets small buffers (each is faulted in at boot).
  return std::min(std::max(64 * kMiB, align_up(largest, kMiB)), std::max(kMiB, align_up(largest_rank, kMiB)));
}

namespace {

/// Writes bytes [lo, hi) of the bucket of `entries` (weights[k] is entry k's bytes) to `dst`, which holds bucket
/// byte lo at dst[0]: the parts of the entries inside the range and the gaps between them, zeroed. Ranges that do
/// not overlap never share a byte, so pieces of one bucket may be filled on several threads at once.
void fill_range(std::span<const WireEntry> entries, std::span<const ShardWeight> weights, uint64_t lo, uint64_t hi,
                uint8_t* dst) {
  auto k = static_cast<size_t>(std::upper_bound(entries.begin(), entries.end(), lo,
                                                [](uint64_t at, const WireEntry& e) { return at < e.offset + e.bytes; }) -
                               entries.begin());
  uint64_t cursor = lo;
  for (; k < entries.size() && entries[k].offset < hi; ++k) {
    const WireEntry& e = entries[k];
    const uint64_t from = std::max(lo, e.offset), to = std::min(hi, e.offset + e.bytes);
    if (from > cursor) std::memset(dst + (cursor - lo), 0, from - cursor);
    if (to > from) copy_streaming(dst + (from - lo), weights[k].bytes.data() + (from - e.offset), to - from);
    cursor = std::max(cursor, to);
  }
  if (hi > cursor) std::memset(dst + (cursor - lo), 0, hi - cursor);
}

/// fill_range of [lo, lo + dst.size()) in pieces of at least `min_piece` bytes across `pool` (may be null).
void fill_parallel(std::span<const WireEntry> entries, std::span<const ShardWeight> weights, uint64_t lo,
                   std::span<uint8_t> dst, WorkPool* pool, uint64_t min_piece) {
  const uint64_t size = dst.size();
  if (pool == nullptr || size == 0) {
    fill_range(entries, weights, lo, lo + size, dst.data());
    return;
  }
  const uint64_t piece = piece_bytes(size, pool->threads(), min_piece);
  pool->run((size + piece - 1) / piece, [&](size_t i) {
    const uint64_t from = i * piece, to = std::min(size, (i + 1) * piece);
    fill_range(entries, weights, lo + from, lo + to, dst.data() + from);
  });
}

uint64_t payload_size(std::span<const WireEntry> entries) {
  return entries.empty() ? 0 : entries.back().offset + entries.back().bytes;
}

}  // namespace

void pack_bucket(std::span<const WireEntry> entries, std::span<const ShardWeight> weights, std::vector<uint8_t>& payload,
                 WorkPool* pool, uint64_t min_piece) {
  payload.resize(payload_size(entries));
  fill_parallel(entries, weights, 0, payload, pool, min_piece);
}

namespace {

/// Sends the buckets handed to it on a thread of its own, one at a time (SendOptions::send_ahead).
class SendAhead {
 public:
  explicit SendAhead(SenderEndpoint& out) : out_(out), thread_([this] { loop(); }) {}
  ~SendAhead() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  /// Waits for the previous bucket's send, rethrowing its error, then hands `bucket` over.
  void send(Bucket bucket) {
    wait();
    std::lock_guard lock(mu_);
    pending_ = std::move(bucket);
    cv_.notify_all();
  }
  /// Waits until nothing is being sent; rethrows the last send's error.
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !pending_ && !sending_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || pending_.has_value(); });
      if (!pending_) return;
      Bucket bucket = std::move(*pending_);
      pending_.reset();
      sending_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        out_.send(std::move(bucket));
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      sending_ = false;
      error_ = std::move(error);
      cv_.notify_all();
    }
  }

  SenderEndpoint& out_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Bucket> pending_;
  bool sending_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

void stream_shard(int rank, std::span<const ShardWeight> shard, uint64_t bucket_size_bytes, Transport& transport,
                  const SendOptions& options) {
  SenderEndpoint& out = transport.sender(rank);
  try {
    check_bucket_sizes(bucket_size_bytes, transport.bucket_size_bytes());
    const auto plan = plan_buckets(rank, shard, bucket_size_bytes);
    std::optional<SendAhead> ahead;
    bool filled = true;  // until the transport says it has no filled path (its answer never changes)
    size_t next = 0;
    for (const auto& entries : plan) {
      const auto weights = shard.subspan(next, entries.size());
      next += entries.size();
      if (filled) {
        filled = out.send_filled(entries, payload_size(entries), [&](uint64_t offset, std::span<uint8_t> dst) {
          fill_parallel(entries, weights, offset, dst, options.pack_pool, uint64_t{1} << 20);
        });
        if (filled) continue;
      }
      Bucket bucket;
      bucket.payload = out.spare_payload();  // an earlier bucket's buffer when the transport has one
      if (bucket.payload.capacity() == 0 && options.buffers != nullptr && !options.buffers->empty()) {
        bucket.payload = std::move(options.buffers->back());
        options.buffers->pop_back();
      }
      pack_bucket(entries, weights, bucket.payload, options.pack_pool);
      bucket.entries = entries;
      if (options.send_ahead && !ahead) ahead.emplace(out);
      if (ahead) {
        ahead->send(std::move(bucket));
      } else {
        out.send(std::move(bucket));
      }
    }
    if (ahead) ahead->wait();
    out.finish();
  } catch (const std::exception& e) {
    out.fail(e.what());
    throw;
  }
}

}  // namespace wsb::refit
