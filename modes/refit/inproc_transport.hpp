#pragma once
// In-process transport: one bounded queue per rank between threads of one process. receive() copies the payload
// into the receiver's pooled buffer (the copy a wire would make), in pieces across a WorkPool when given one, and
// hands the bucket's buffer back to the sender (spare_payload) for a later bucket.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "modes/refit/transport.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

class InProcTransport final : public Transport {
 public:
  /// `ranks` channels of buckets up to `bucket_size_bytes`; each queue holds at most `depth` buckets (>= 1).
  /// `copy_pool` (may be null; must outlive the transport) splits each receive copy across its threads.
  /// Throws Error(Mismatch) when ranks < 1, depth < 1 or bucket_size_bytes == 0.
  InProcTransport(int ranks, uint64_t bucket_size_bytes, size_t depth = 2, WorkPool* copy_pool = nullptr);
  ~InProcTransport() override;

  int ranks() const override { return static_cast<int>(channels_.size()); }
  uint64_t bucket_size_bytes() const override { return bucket_size_bytes_; }
  SenderEndpoint& sender(int rank) override;
  ReceiverEndpoint& receiver(int rank) override;

 private:
  class Channel;
  uint64_t bucket_size_bytes_;
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace wsb::refit
