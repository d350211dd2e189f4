#pragma once
// When each rank's stream began to flow: a Transport that forwards to another one and notes, per rank, the moment
// its receiver first returned a batch (its first bucket, or the end of a stream with none). The refit mode reports
// the span from starting the link to the last rank's first batch as prepare.stream_start: the senders' setup that
// did not overlap the trainer's prepare (a cuda-ipc sender process's CUDA context, rings, handshakes) plus the
// first bucket, apart from the steady stream.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "modes/refit/transport.hpp"

namespace wsb::refit {

class FirstArrival final : public Transport {
 public:
  /// `inner` must outlive this object.
  explicit FirstArrival(Transport& inner);
  ~FirstArrival() override;
  int ranks() const override { return inner_.ranks(); }
  uint64_t bucket_size_bytes() const override { return inner_.bucket_size_bytes(); }
  SenderEndpoint& sender(int rank) override { return inner_.sender(rank); }
  /// Forwards receive() and cancel(); receive() notes the time of the rank's first returned batch.
  ReceiverEndpoint& receiver(int rank) override;
  /// Seconds from `since` until every rank had its first batch (the latest of them); nullopt while some rank has
  /// none yet (its receiver failed or has not returned). Thread-safe.
  std::optional<double> seconds_since(std::chrono::steady_clock::time_point since) const;

 private:
  class Receiver;
  Transport& inner_;
  mutable std::mutex mu_;
  std::vector<std::optional<std::chrono::steady_clock::time_point>> first_;  // [rank]
  std::vector<std::unique_ptr<Receiver>> receivers_;
};

}  // namespace wsb::refit
