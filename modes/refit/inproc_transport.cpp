#include "modes/refit/inproc_transport.hpp"

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

/// One rank's queue; implements both endpoints.
class InProcTransport::Channel final : public SenderEndpoint, public ReceiverEndpoint {
 public:
  Channel(int rank, uint64_t bucket_bytes, size_t depth, WorkPool* copy_pool)
      : rank_(rank), bucket_bytes_(bucket_bytes), depth_(depth), copy_pool_(copy_pool) {}

  void send(Bucket bucket) override {
    if (bucket.payload.size() > bucket_bytes_) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("bucket of {} B exceeds bucket_size_bytes {} B", bucket.payload.size(), bucket_bytes_));
    }
    std::unique_lock lock(mu_);
    if (state_ != State::Open) fail_rank(ErrorKind::State, rank_, "send after the stream was closed");
    cv_.wait(lock, [&] { return queue_.size() < depth_ || !cancel_reason_.empty(); });
    if (!cancel_reason_.empty()) fail_rank(ErrorKind::Io, rank_, fmt::format("receiver gave up: {}", cancel_reason_));
    queue_.push_back(std::move(bucket));
    cv_.notify_all();
  }

  void finish() override {
    std::lock_guard lock(mu_);
    if (state_ == State::Open) state_ = State::Finished;
    cv_.notify_all();
  }

  void fail(const std::string& message) noexcept override {
    std::lock_guard lock(mu_);
    if (state_ == State::Open) {
      state_ = State::Failed;
      failure_ = message;
    }
    cv_.notify_all();
  }

  void cancel(const std::string& reason) noexcept override {
    std::lock_guard lock(mu_);
    if (cancel_reason_.empty()) cancel_reason_ = reason.empty() ? "cancelled" : reason;
    queue_.clear();
    cv_.notify_all();
  }

  ReceivedBatch receive(std::span<uint8_t> into) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || state_ != State::Open || !cancel_reason_.empty(); });
    if (state_ == State::Failed) {
      fail_rank(ErrorKind::Io, rank_, fmt::format("transport failed mid-stream: {}", failure_));
    }
    if (queue_.empty() && state_ == State::Open) {
      fail_rank(ErrorKind::Io, rank_, fmt::format("receiver gave up: {}", cancel_reason_));
    }
    if (queue_.empty()) return ReceivedBatch{.end = true, .entries = {}, .payload_bytes = 0};
    Bucket bucket = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    lock.unlock();
    if (bucket.payload.size() > into.size()) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("received bucket of {} B exceeds the receive buffer of {} B", bucket.payload.size(),
                            into.size()));
    }
    parallel_copy(copy_pool_, into.first(bucket.payload.size()), bucket.payload);
    const uint64_t payload_bytes = bucket.payload.size();
    {
      // Hand the buffer back to the sender: every bucket in flight (queued, being received, being packed) has one,
      // so keeping that many spares means no bucket-sized allocation (and its page faults) after the first few.
      std::lock_guard relock(mu_);
      if (spares_.size() < depth_ + 2) spares_.push_back(std::move(bucket.payload));
    }
    return ReceivedBatch{.end = false, .entries = std::move(bucket.entries), .payload_bytes = payload_bytes};
  }

  std::vector<uint8_t> spare_payload() override {
    std::lock_guard lock(mu_);
    if (spares_.empty()) return {};
    std::vector<uint8_t> spare = std::move(spares_.back());
    spares_.pop_back();
    return spare;
  }

 private:
  enum class State { Open, Finished, Failed };
  int rank_;
  uint64_t bucket_bytes_;
  size_t depth_;
  WorkPool* copy_pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bucket> queue_;
  std::vector<std::vector<uint8_t>> spares_;  // received buckets' payloads, for the sender's next buckets
  State state_ = State::Open;
  std::string failure_;
  std::string cancel_reason_;  // set by the receiver: senders stop instead of waiting for room forever
};

InProcTransport::InProcTransport(int ranks, uint64_t bucket_size_bytes, size_t depth, WorkPool* copy_pool)
    : bucket_size_bytes_(bucket_size_bytes) {
  if (ranks < 1 || depth < 1 || bucket_size_bytes == 0) {
    throw Error(ErrorKind::Mismatch, fmt::format("refit: in-process transport needs ranks >= 1, depth >= 1 and "
                                                 "bucket_size_bytes > 0 (got {}, {}, {})",
                                                 ranks, depth, bucket_size_bytes));
  }
  for (int r = 0; r < ranks; ++r) channels_.push_back(std::make_unique<Channel>(r, bucket_size_bytes, depth, copy_pool));
}

InProcTransport::~InProcTransport() = default;

SenderEndpoint& InProcTransport::sender(int rank) { return *channels_.at(static_cast<size_t>(rank)); }
ReceiverEndpoint& InProcTransport::receiver(int rank) { return *channels_.at(static_cast<size_t>(rank)); }

}  // namespace wsb::refit
