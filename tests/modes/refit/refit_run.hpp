#pragma once
// One whole refit run by the refit suites: a StreamAligner receives every rank's stream (from sender threads of
// this process, or from another process over a ShmTransport) and every delivered weight is compared byte for byte
// with the shard the sender streamed, read from poisoned recycled buffers. The record carries exact counts: weight
// bytes delivered, aligned batches, and per rank the transport batches and payload bytes the receivers got.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/modes/refit/refit_test_util.hpp"

namespace wsb::refit::test {

/// What one refit delivered.
struct RunRecord {
  std::vector<std::string> names;  ///< delivered, in order
  uint64_t batches = 0;            ///< aligned batches
  uint64_t bytes = 0;              ///< weight bytes delivered, all ranks
  std::vector<uint64_t> transport_batches;  ///< [rank] transport batches received (the end marker excluded)
  std::vector<uint64_t> transport_bytes;    ///< [rank] payload bytes received (alignment padding included)
  bool boundaries_differ = false;  ///< some batch was cut short by another rank's boundary
  size_t max_outstanding = 0;      ///< most pool buffers lent at once
};

/// Forwards to a transport, counting per rank the transport batches its receivers got and their payload bytes.
class CountingTransport final : public Transport {
 public:
  explicit CountingTransport(Transport& inner) : inner_(inner) {
    for (int r = 0; r < inner.ranks(); ++r) receivers_.emplace_back(inner.receiver(r));
  }
  int ranks() const override { return inner_.ranks(); }
  uint64_t bucket_size_bytes() const override { return inner_.bucket_size_bytes(); }
  SenderEndpoint& sender(int rank) override { return inner_.sender(rank); }
  ReceiverEndpoint& receiver(int rank) override { return receivers_.at(static_cast<size_t>(rank)); }
  uint64_t batches(int rank) const { return receivers_.at(static_cast<size_t>(rank)).batches; }
  uint64_t bytes(int rank) const { return receivers_.at(static_cast<size_t>(rank)).bytes; }

 private:
  struct Counter final : ReceiverEndpoint {
    explicit Counter(ReceiverEndpoint& in) : inner(in) {}
    ReceivedBatch receive(std::span<uint8_t> into) override {
      ReceivedBatch b = inner.receive(into);
      if (!b.end) {
        ++batches;
        bytes += b.payload_bytes;
      }
      return b;
    }
    void cancel(const std::string& reason) noexcept override { inner.cancel(reason); }
    ReceiverEndpoint& inner;
    uint64_t batches = 0;
    uint64_t bytes = 0;
  };
  Transport& inner_;
  std::vector<Counter> receivers_;
};

/// Sum of every rank's weight bytes: what a complete refit must deliver.
inline uint64_t total_weight_bytes(const Shards& shards) {
  uint64_t n = 0;
  for (const auto& rank : shards.specs) {
    for (const auto& s : rank) n += s.bytes();
  }
  return n;
}

/// Aligned batches of a refit of `shards` at `bucket_bytes`: an aligned batch ends wherever some rank's bucket ends,
/// so the count is the number of distinct bucket ends (as weight indices) over all ranks.
inline uint64_t expected_aligned_batches(const Shards& shards, uint64_t bucket_bytes) {
  std::set<size_t> ends;
  for (int r = 0; r < static_cast<int>(shards.specs.size()); ++r) {
    size_t end = 0;
    for (const auto& bucket : plan_buckets(r, shards.weights(r), bucket_bytes)) ends.insert(end += bucket.size());
  }
  return ends.size();
}

/// Receives one refit of `shards` over `transport` with a StreamAligner receiving as `mode` says (its pool the
/// least that mode needs) and checks every payload byte at delivery time (EXPECTs, so a mismatch names the rank,
/// weight and batch). The senders run elsewhere.
inline RunRecord receive_and_check(const Shards& shards, uint64_t bucket_bytes, Transport& transport,
                                   ReceiveMode mode = ReceiveMode::Inline) {
  const int ranks = static_cast<int>(shards.specs.size());
  RefitLayout layout(shards.specs);
  CountingTransport counted(transport);
  BufferPool pool(bucket_bytes, static_cast<size_t>((mode == ReceiveMode::Ahead ? 2 : 1) * ranks), kPoison);
  StreamAligner aligner(layout, counted, pool, mode);
  RunRecord rec;
  while (const AlignedBatch* b = aligner.next()) {
    EXPECT_EQ(b->sequence, rec.batches);
    EXPECT_EQ(b->first_weight, rec.names.size());
    EXPECT_EQ(b->payloads.size(), static_cast<size_t>(ranks));
    for (size_t k = 0; k < b->names.size(); ++k) {
      const size_t index = b->first_weight + k;
      rec.names.emplace_back(b->names[k]);
      for (int r = 0; r < ranks; ++r) {
        const WeightView& v = b->payloads[static_cast<size_t>(r)].at(k);
        EXPECT_EQ(*v.spec, shards.specs[static_cast<size_t>(r)][index]);
        const auto& want = shards.data[static_cast<size_t>(r)][index];
        EXPECT_EQ(v.bytes.size(), want.size());
        if (v.bytes.size() != want.size()) continue;
        EXPECT_TRUE(std::equal(want.begin(), want.end(), v.bytes.begin()))
            << "rank " << r << " weight " << b->names[k] << " batch " << b->sequence;
      }
    }
    ++rec.batches;
  }
  size_t max_plan = 0;
  for (int r = 0; r < ranks; ++r) {
    max_plan = std::max(max_plan, plan_buckets(r, shards.weights(r), bucket_bytes).size());
    rec.transport_batches.push_back(counted.batches(r));
    rec.transport_bytes.push_back(counted.bytes(r));
  }
  rec.bytes = aligner.bytes_delivered();
  rec.boundaries_differ = rec.batches > max_plan;
  rec.max_outstanding = pool.max_outstanding();
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(aligner.batches_delivered(), rec.batches);
  return rec;
}

/// One refit over a transport from `make`: a sender thread per rank streams `shards`, this thread receives.
inline RunRecord run_and_check(const Shards& shards, uint64_t bucket_bytes, const TransportFactory& make,
                               ReceiveMode mode = ReceiveMode::Inline) {
  auto transport = make(static_cast<int>(shards.specs.size()), bucket_bytes, 2);
  Senders senders(shards, bucket_bytes, *transport);
  RunRecord rec = receive_and_check(shards, bucket_bytes, *transport, mode);
  senders.join();
  return rec;
}

/// Per rank: the transport batches and payload bytes (padding included) the sender packs for `shards`.
struct SenderPlan {
  std::vector<uint64_t> batches;
  std::vector<uint64_t> bytes;
};
inline SenderPlan sender_plan(const Shards& shards, uint64_t bucket_bytes) {
  SenderPlan p;
  for (int r = 0; r < static_cast<int>(shards.specs.size()); ++r) {
    const auto plan = plan_buckets(r, shards.weights(r), bucket_bytes);
    uint64_t bytes = 0;
    for (const auto& b : plan) bytes += b.back().offset + b.back().bytes;
    p.batches.push_back(plan.size());
    p.bytes.push_back(bytes);
  }
  return p;
}

}  // namespace wsb::refit::test
