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

void pack_bucket(std::span<const WireEntry> entries, std::span<const ShardWeight> weights, std::vector<uint8_t>& payload,
                 WorkPool* pool, uint64_t min_piece) {
  const uint64_t size = entries.empty() ? 0 : entries.back().offset + entries.back().bytes;
  payload.resize(size);
  // Each piece fills bucket bytes [lo, hi): the parts of the entries inside it and the gaps between them, so
  // pieces never share a byte and every byte of the payload is written once.
  const auto fill = [&](uint64_t lo, uint64_t hi) {
    auto k = static_cast<size_t>(std::upper_bound(entries.begin(), entries.end(), lo,
                                                  [](uint64_t at, const WireEntry& e) { return at < e.offset + e.bytes; }) -
                                 entries.begin());
    uint64_t cursor = lo;
    for (; k < entries.size() && entries[k].offset < hi; ++k) {
      const WireEntry& e = entries[k];
      const uint64_t from = std::max(lo, e.offset), to = std::min(hi, e.offset + e.bytes);
      if (from > cursor) std::memset(payload.data() + cursor, 0, from - cursor);
      if (to > from) copy_streaming(payload.data() + from, weights[k].bytes.data() + (from - e.offset), to - from);
      cursor = std::max(cursor, to);
    }
    if (hi > cursor) std::memset(payload.data() + cursor, 0, hi - cursor);
  };
  if (pool == nullptr || size == 0) {
    fill(0, size);
    return;
  }
  const uint64_t piece = piece_bytes(size, pool->threads(), min_piece);
  pool->run((size + piece - 1) / piece, [&](size_t i) { fill(i * piece, std::min(size, (i + 1) * piece)); });
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
    if (options.send_ahead) ahead.emplace(out);
    size_t next = 0;
    for (const auto& entries : plan) {
      Bucket bucket;
      bucket.payload = out.spare_payload();  // an earlier bucket's buffer when the transport has one
      if (bucket.payload.capacity() == 0 && options.buffers != nullptr && !options.buffers->empty()) {
        bucket.payload = std::move(options.buffers->back());
        options.buffers->pop_back();
      }
      pack_bucket(entries, shard.subspan(next, entries.size()), bucket.payload, options.pack_pool);
      next += entries.size();
      bucket.entries = entries;
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
