// Sender bucket packing, the setup bucket-size handshake, and the recycled receive-buffer pool (poisoning, at most
// one outstanding batch per rank, a reference held past recycling reads the poison).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "models/layout/tp_layout.hpp"
#include "tests/modes/refit/refit_test_util.hpp"
#include "tests/support/test_support.hpp"

namespace wsb::refit::test {
namespace {

using wsb::test::error_text;

TEST(RefitSender, PacksWeightsInOrderAtAlignedOffsetsAcrossDtypes) {
  const auto shards = make_shards({{{"x", DType::BF16, {10}},   // 20 B at 0
                                    {"y", DType::F32, {8}},     // 32 B at 64
                                    {"z", DType::U8, {100}},    // 100 B: 128 + 100 > 200 -> next bucket at 0
                                    {"w", DType::I64, {2}}}});  // 16 B at 128
  const auto plan = plan_buckets(0, shards.weights(0), 200);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0], (std::vector<WireEntry>{{{"x", DType::BF16, {10}}, 0, 20}, {{"y", DType::F32, {8}}, 64, 32}}));
  EXPECT_EQ(plan[1], (std::vector<WireEntry>{{{"z", DType::U8, {100}}, 0, 100}, {{"w", DType::I64, {2}}, 128, 16}}));
}

/// A sender endpoint that records what it is sent and lends back a dirty buffer of its own as the spare payload
/// (none when `lends` is false). Thread-safe: with send-ahead, send() runs on another thread than spare_payload().
class RecordingTransport final : public Transport, public SenderEndpoint {
 public:
  explicit RecordingTransport(uint64_t bucket, bool lends = true) : bucket_(bucket), lends_(lends) {}
  int ranks() const override { return 1; }
  uint64_t bucket_size_bytes() const override { return bucket_; }
  SenderEndpoint& sender(int) override { return *this; }
  ReceiverEndpoint& receiver(int) override { throw std::logic_error("sender only"); }
  void send(Bucket bucket) override {
    std::lock_guard lock(mu_);
    sent_data.push_back(bucket.payload.data());
    sent.push_back(bucket);
    senders.insert(std::this_thread::get_id());
    if (!lends_) return;
    spare_ = std::move(bucket.payload);
    std::fill(spare_.begin(), spare_.end(), uint8_t{0xEE});  // stale bytes the next bucket must not carry
  }
  void finish() override { finished = true; }
  void fail(const std::string&) noexcept override {}
  std::vector<uint8_t> spare_payload() override {
    std::lock_guard lock(mu_);
    return std::exchange(spare_, {});
  }
  std::vector<Bucket> sent;
  std::vector<const uint8_t*> sent_data;
  std::set<std::thread::id> senders;  ///< threads send() ran on
  bool finished = false;

 private:
  uint64_t bucket_;
  bool lends_;
  std::mutex mu_;
  std::vector<uint8_t> spare_;
};

TEST(RefitSender, PackingInPiecesEqualsPackingWhole) {
  // Uneven weights and 64 B alignment gaps, packed in 64 B pieces by three threads into a dirty buffer: every piece
  // boundary falls inside a weight or a gap somewhere.
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 9; ++i) specs.push_back({fmt_name(static_cast<size_t>(i)), DType::U8, {37 + 91 * i}});
  const auto shards = make_shards({specs});
  const auto plan = plan_buckets(0, shards.weights(0), 1 << 16);
  ASSERT_EQ(plan.size(), 1u);
  std::vector<uint8_t> whole;
  pack_bucket(plan[0], shards.weights(0), whole, nullptr);
  std::vector<uint8_t> expected(plan[0].back().offset + plan[0].back().bytes, 0);
  for (size_t k = 0; k < plan[0].size(); ++k) {
    std::copy(shards.data[0][k].begin(), shards.data[0][k].end(), expected.begin() + plan[0][k].offset);
  }
  EXPECT_EQ(whole, expected);
  WorkPool pool(3);
  std::vector<uint8_t> pieces(expected.size() + 500, 0xEE);
  pack_bucket(plan[0], shards.weights(0), pieces, &pool, 64);
  EXPECT_EQ(pieces, expected);
}

TEST(RefitSender, SendAheadAndOwnBuffersSendTheSameBuckets) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back({fmt_name(static_cast<size_t>(i)), DType::BF16, {10 + i}});
  const auto shards = make_shards({specs});
  RecordingTransport plain(100);
  stream_shard(0, shards.weights(0), 100, plain);
  // The transport lends nothing back: the sender packs into its own two buffers, then allocates.
  RecordingTransport ahead(100, /*lends=*/false);
  std::vector<std::vector<uint8_t>> own(2, std::vector<uint8_t>(100, 0xEE));
  const std::set<const uint8_t*> own_data{own[0].data(), own[1].data()};
  WorkPool pool(2);
  stream_shard(0, shards.weights(0), 100, ahead, SendOptions{.pack_pool = &pool, .buffers = &own, .send_ahead = true});
  ASSERT_EQ(ahead.sent.size(), plain.sent.size());
  ASSERT_EQ(ahead.sent.size(), 3u);  // two weights per 100 B bucket (at 0 and 64)
  for (size_t b = 0; b < plain.sent.size(); ++b) {
    EXPECT_EQ(ahead.sent[b].entries, plain.sent[b].entries) << "bucket " << b;
    EXPECT_EQ(ahead.sent[b].payload, plain.sent[b].payload) << "bucket " << b;
  }
  EXPECT_TRUE(own.empty());
  EXPECT_TRUE(own_data.contains(ahead.sent_data[0]));
  EXPECT_TRUE(own_data.contains(ahead.sent_data[1]));
  EXPECT_EQ(ahead.senders.size(), 1u);
  EXPECT_FALSE(ahead.senders.contains(std::this_thread::get_id()));  // sent from the send-ahead thread
  EXPECT_TRUE(ahead.finished);
}

TEST(RefitSender, PacksIntoTheTransportsSparePayloadWithZeroedGaps) {
  // Three buckets of two weights each: 20 B at 0 and 32 B at 64 (a 44 B gap), in buckets of 100 B.
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back({fmt_name(static_cast<size_t>(i)), i % 2 ? DType::F32 : DType::BF16,
                                               {i % 2 ? 8 : 10}});
  const auto shards = make_shards({specs});
  RecordingTransport transport(100);
  stream_shard(0, shards.weights(0), 100, transport);
  ASSERT_EQ(transport.sent.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    std::vector<uint8_t> expected(96, 0);
    std::copy(shards.data[0][2 * b].begin(), shards.data[0][2 * b].end(), expected.begin());
    std::copy(shards.data[0][2 * b + 1].begin(), shards.data[0][2 * b + 1].end(), expected.begin() + 64);
    EXPECT_EQ(transport.sent[b].payload, expected) << "bucket " << b;
  }
  // Buckets 1 and 2 were packed into bucket 0's buffer, handed back each time.
  EXPECT_EQ(transport.sent_data[1], transport.sent_data[0]);
  EXPECT_EQ(transport.sent_data[2], transport.sent_data[0]);
}

TEST(RefitSender, RefusesAWeightLargerThanABucket) {
  const auto shards = make_shards({{}, {{"big", DType::F32, {64}}}});
  EXPECT_EQ(error_text([&] { plan_buckets(1, shards.weights(1), 255); }),
            "refit: rank 1: weight 'big' of 256 B does not fit in a bucket of 255 B");
}

// The smoke matrix's refit cells: tiny Llama at TP 2 with 128 KiB and 256 KiB buckets. Both ranks stream the same
// bytes (the tiny Llama's heads split evenly); the plan is what the results' refit_streams record.
TEST(RefitSender, PlansTheTinyLlamaStreamsPerRank) {
  const ModelProfile profile = wsb::test::tiny_profile();
  const RankShards shards = plan_rank_shards(profile.canonical_tensors(), build_rank_layouts(profile, 2));
  ASSERT_EQ(shards.size(), 2u);
  std::vector<uint64_t> shard_bytes(2, 0);
  for (size_t r = 0; r < 2; ++r) {
    for (const ShardSlice& s : shards[r]) shard_bytes[r] += s.spec.bytes();
  }
  // Each rank's payload is its shards' bytes: 427264 B (417.25 KiB), so at least 4 buckets of 128 KiB, 2 of 256 KiB.
  EXPECT_EQ(shard_bytes, (std::vector<uint64_t>{427264, 427264}));
  EXPECT_EQ(plan_rank_streams(shards, 131072),
            (std::vector<RankStreamPlan>{{.buckets = 4, .bytes = 427264}, {.buckets = 4, .bytes = 427264}}));
  EXPECT_EQ(plan_rank_streams(shards, 262144),
            (std::vector<RankStreamPlan>{{.buckets = 2, .bytes = 427264}, {.buckets = 2, .bytes = 427264}}));
  // bucket_bytes 0: the mode's default, one bucket per rank, no larger than a rank's stream rounded up to MiB.
  EXPECT_EQ(refit_bucket_bytes(0, shards), 1ull << 20);
  EXPECT_EQ(refit_bucket_bytes(131072, shards), 131072u);
  EXPECT_EQ(plan_rank_streams(shards, refit_bucket_bytes(0, shards)),
            (std::vector<RankStreamPlan>{{.buckets = 1, .bytes = 427264}, {.buckets = 1, .bytes = 427264}}));
}

/// Shards whose weights are BF16 [rows, 512] (1 KiB per row), `rows` per weight, one vector per rank.
RankShards shards_of_rows(const std::vector<std::vector<int64_t>>& ranks) {
  RankShards shards(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (size_t i = 0; i < ranks[r].size(); ++i) {
      ShardSlice s;
      s.spec = {"w" + std::to_string(i), DType::BF16, {ranks[r][i], 512}};
      shards[r].push_back(s);
    }
  }
  return shards;
}

TEST(RefitSender, DefaultBucketHoldsTheLargestWeightAndNeverExceedsARanksStream) {
  constexpr int64_t kMiBRows = 1024;  // rows of 1 KiB
  // 3 x 40 MiB on a rank: 64 MiB (the floor), below the 120 MiB stream.
  EXPECT_EQ(refit_bucket_bytes(0, shards_of_rows({{40 * kMiBRows, 40 * kMiBRows, 40 * kMiBRows}})), 64ull << 20);
  // A 100 MiB weight: 100 MiB; 100 MiB + 1 KiB: rounded up to 101 MiB.
  EXPECT_EQ(refit_bucket_bytes(0, shards_of_rows({{100 * kMiBRows}, {kMiBRows}})), 100ull << 20);
  EXPECT_EQ(refit_bucket_bytes(0, shards_of_rows({{100 * kMiBRows + 1, 100 * kMiBRows}})), 101ull << 20);
  // Ranks of 10 MiB and 20 MiB + 1 KiB: the larger stream rounded up, 21 MiB.
  EXPECT_EQ(refit_bucket_bytes(0, shards_of_rows({{5 * kMiBRows, 5 * kMiBRows}, {20 * kMiBRows, 1}})), 21ull << 20);
  // Entries sit at 64 B alignment: 1 MiB - 2 B then 2 B need 1 MiB + 62 B, so 2 MiB; unpadded they would fit 1 MiB.
  RankShards padded(1, std::vector<ShardSlice>(2));
  padded[0][0].spec = {"a", DType::BF16, {1, 524287}};
  padded[0][1].spec = {"b", DType::BF16, {1, 1}};
  EXPECT_EQ(refit_bucket_bytes(0, padded), 2ull << 20);
  EXPECT_EQ(plan_rank_streams(padded, refit_bucket_bytes(0, padded)),
            (std::vector<RankStreamPlan>{{.buckets = 1, .bytes = (1u << 20)}}));
  // No weights at all: 1 MiB, never 0.
  EXPECT_EQ(refit_bucket_bytes(0, RankShards(2)), 1ull << 20);
  const RankShards small = shards_of_rows({{7 * kMiBRows, 3}, {kMiBRows}});
  EXPECT_EQ(plan_rank_streams(small, refit_bucket_bytes(0, small)),
            (std::vector<RankStreamPlan>{{.buckets = 1, .bytes = (7u << 20) + 3072}, {.buckets = 1, .bytes = 1u << 20}}));
}

TEST(RefitSender, RefusesBytesDisagreeingWithTheSpec) {
  std::vector<uint8_t> bytes(3);
  const std::vector<ShardWeight> shard{{{"h", DType::F16, {2}}, bytes}};
  EXPECT_EQ(error_text([&] { plan_buckets(0, shard, 64); }),
            "refit: rank 0: weight 'h' has 3 B of data, its spec F16 [2] needs 4 B");
}

TEST(RefitSetup, BucketSizeMismatchIsRefusedOnBothSides) {
  const auto shards = make_shards({{{"a", DType::U8, {8}}}});
  RefitLayout layout(shards.specs);
  InProcTransport transport(1, 4096);
  const std::string want =
      "refit: bucket_size_bytes mismatch: sender 4096 B, receiver 2048 B (both sides must use the same size)";
  BufferPool small(2048, 1);
  EXPECT_EQ(error_text([&] { StreamAligner(layout, transport, small); }), want);
  // A sender configured differently from the transport fails its channel with the same kind of message.
  EXPECT_EQ(error_text([&] { stream_shard(0, shards.weights(0), 8192, transport); }),
            "refit: bucket_size_bytes mismatch: sender 8192 B, receiver 4096 B (both sides must use the same size)");
  std::vector<uint8_t> sink(4096);
  EXPECT_EQ(error_text([&] { transport.receiver(0).receive(sink); }),
            "refit: rank 0: transport failed mid-stream: refit: bucket_size_bytes mismatch: sender 8192 B, receiver "
            "4096 B (both sides must use the same size)");
}

TEST(RefitSetup, PoolSmallerThanTheRankCountIsRefused) {
  const auto shards = make_shards({{{"a", DType::U8, {8}}}, {{"a", DType::U8, {8}}}});
  RefitLayout layout(shards.specs);
  InProcTransport transport(2, 64);
  BufferPool pool(64, 1);
  EXPECT_EQ(error_text([&] { StreamAligner(layout, transport, pool); }),
            "refit: receive buffer pool has 1 buffers, 2 ranks need 2");
}

TEST(RefitBufferPool, PoisonsOnReleaseAndRefusesWhenExhausted) {
  BufferPool pool(96, 2, kPoison);
  PooledBuffer a = pool.acquire();
  PooledBuffer b = pool.acquire();
  std::fill(a.span().begin(), a.span().end(), uint8_t{7});
  EXPECT_EQ(error_text([&] { pool.acquire(); }), "refit: receive buffer pool exhausted (2 of 2 buffers lent)");
  const std::span<uint8_t> held = a.span();
  a.reset();
  EXPECT_EQ(std::count(held.begin(), held.end(), kPoison), 96);
  EXPECT_EQ(pool.outstanding(), 1u);
  EXPECT_EQ(pool.max_outstanding(), 2u);
  EXPECT_EQ(pool.recycled(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.span().data()) % kEntryAlignment, 0u);
}

TEST(RefitBufferPool, ReferenceHeldPastRecyclingReadsThePoison) {
  // Two ranks, one weight per bucket: the batch-0 view of rank 0 is recycled by the second next().
  const auto shards = make_shards({{{"a", DType::U8, {64}}, {"b", DType::U8, {64}}},
                                   {{"a", DType::U8, {64}}, {"b", DType::U8, {64}}}});
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    InProcTransport transport(2, 64);
    BufferPool pool(64, 2, kPoison);
    StreamAligner aligner(layout, transport, pool);
    Senders senders(shards, 64, transport);
    const AlignedBatch* first = aligner.next();
    ASSERT_NE(first, nullptr);
    const std::span<const uint8_t> held = first->payloads[0][0].bytes;  // kept past its batch: a bug
    EXPECT_EQ(held[0], pattern_byte(0, 0, 0));
    const AlignedBatch* second = aligner.next();
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->names, (std::vector<std::string_view>{"b"}));
    // The buffer was returned (poisoned), then lent again and refilled with 'b' of one of the ranks, or still
    // poisoned: either way the stale reference no longer reads 'a'.
    bool stale_is_a = true;
    for (uint64_t k = 0; k < held.size(); ++k) stale_is_a = stale_is_a && held[k] == pattern_byte(0, 0, k);
    EXPECT_FALSE(stale_is_a);
    EXPECT_EQ(pool.recycled(), 2u);
    EXPECT_EQ(aligner.next(), nullptr);
    EXPECT_EQ(pool.max_outstanding(), 2u);
  });
}

}  // namespace
}  // namespace wsb::refit::test
