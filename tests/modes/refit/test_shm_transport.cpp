// The shared-memory transport of the refit mode between two processes: a forked child streams per-rank shards (the
// trainer), this process aligns and checks them (the engine). Exact bytes and counts end to end; a child that fails,
// sends an oversized bucket or is killed, and a receiver that dies or gives up, each end in a precise error, never
// a hang. Endpoint errors and cancel are compared with the in-process transport's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "modes/refit/shm_wire.hpp"
#include "tests/modes/refit/child_process.hpp"
#include "tests/modes/refit/refit_run.hpp"

namespace wsb::refit::test {
namespace {

using namespace std::chrono_literals;
using wsb::test::error_message;

/// Streams every rank of `shards` with stream_shard, one thread per rank; after all joined, rethrows the first
/// rank's error (this is the trainer side, run in the child).
void stream_every_rank(const Shards& shards, uint64_t bucket_bytes, Transport& transport) {
  std::vector<std::optional<Error>> errors(shards.specs.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < transport.ranks(); ++r) {
    threads.emplace_back([&, r] {
      try {
        stream_shard(r, shards.weights(r), bucket_bytes, transport);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) throw *e;
  }
}

/// The buckets stream_shard would send for `shard` (for senders that stop part-way).
std::vector<Bucket> pack(int rank, const std::vector<ShardWeight>& shard, uint64_t bucket_bytes) {
  std::vector<Bucket> out;
  size_t next = 0;
  for (const auto& entries : plan_buckets(rank, shard, bucket_bytes)) {
    Bucket b;
    b.payload.resize(entries.back().offset + entries.back().bytes);
    for (const auto& e : entries) std::memcpy(b.payload.data() + e.offset, shard[next++].bytes.data(), e.bytes);
    b.entries = entries;
    out.push_back(std::move(b));
  }
  return out;
}

/// `weights` weights per rank, dtypes cycling over six, 4 columns, rank-dependent rows (uneven shards) and 576 to
/// 992 B each: two weights never share a 1024 B bucket (each takes more than half of it).
std::vector<std::vector<TensorSpec>> mid_sized_specs(int ranks, size_t weights) {
  const DType dtypes[] = {DType::BF16, DType::F32, DType::U8, DType::F16, DType::F8_E4M3, DType::I64};
  std::vector<std::vector<TensorSpec>> specs(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < weights; ++i) {
      const DType d = dtypes[i % 6];
      const auto target = static_cast<int64_t>(600 + (i * 37 + static_cast<size_t>(r) * 53) % 400);
      const auto rows = target / (4 * static_cast<int64_t>(dtype_size(d)));
      specs[static_cast<size_t>(r)].push_back({fmt_name(i), d, {rows, 4}});
    }
  }
  return specs;
}


/// The child streams every rank of `shards`; this process receives and checks everything.
RunRecord cross_process_refit(const Shards& shards, uint64_t bucket_bytes) {
  ShmTransport transport(static_cast<int>(shards.specs.size()), bucket_bytes);
  ChildProcess child([&] {
    transport.set_receiver_alive(parent_alive());
    stream_every_rank(shards, bucket_bytes, transport);
  });
  transport.set_sender_alive(child.liveness());
  RunRecord rec;
  hang_guard([&] { rec = receive_and_check(shards, bucket_bytes, transport); });
  EXPECT_EQ(child.wait(), exited_with(kChildReturned));
  return rec;
}

TEST(RefitShmTransport, CrossProcessRoundTripDeliversExactBytes) {
  const auto shards = make_shards(mid_sized_specs(3, 24));
  ASSERT_EQ(total_weight_bytes(shards), 56056u);
  for (const uint64_t bucket : {uint64_t{1024}, uint64_t{4096}, uint64_t{16384}, uint64_t{1} << 20}) {
    SCOPED_TRACE("bucket " + std::to_string(bucket));
    const RunRecord rec = cross_process_refit(shards, bucket);
    EXPECT_EQ(rec.names, names_upto(24));
    EXPECT_EQ(rec.bytes, 56056u);
    EXPECT_EQ(rec.batches, expected_aligned_batches(shards, bucket));
    const SenderPlan plan = sender_plan(shards, bucket);
    EXPECT_EQ(rec.transport_batches, plan.batches);
    EXPECT_EQ(rec.transport_bytes, plan.bytes);
    if (bucket == 1024) {  // one weight per bucket on every rank: every bucket is an aligned batch
      EXPECT_EQ(rec.batches, 24u);
      EXPECT_EQ(rec.transport_batches, (std::vector<uint64_t>{24, 24, 24}));
    }
    if (bucket == uint64_t{1} << 20) {  // the whole shard in one bucket per rank
      EXPECT_EQ(rec.batches, 1u);
      EXPECT_EQ(rec.transport_batches, (std::vector<uint64_t>{1, 1, 1}));
    }
  }
}

TEST(RefitShmTransport, CrossProcessRandomLayoutsDeliverEveryWeightOnceInOrder) {
  std::mt19937 rng(20240917);
  int differing = 0;
  for (int trial = 0; trial < 16; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int ranks = 1 + static_cast<int>(rng() % 4);
    const size_t weights = 1 + rng() % 40;
    const uint64_t bucket = 256 + rng() % 4096;
    const auto shards = make_shards(random_specs(rng, ranks, weights, bucket));
    const RunRecord rec = cross_process_refit(shards, bucket);
    EXPECT_EQ(rec.names, names_upto(weights));
    EXPECT_EQ(rec.bytes, total_weight_bytes(shards));
    EXPECT_EQ(rec.batches, expected_aligned_batches(shards, bucket));
    EXPECT_EQ(rec.transport_batches, sender_plan(shards, bucket).batches);
    EXPECT_EQ(rec.transport_bytes, sender_plan(shards, bucket).bytes);
    EXPECT_LE(rec.max_outstanding, static_cast<size_t>(ranks));
    if (rec.boundaries_differ) ++differing;
    if (HasFailure()) return;
  }
  EXPECT_GE(differing, 4);  // misaligned per-rank boundaries were exercised
}

TEST(RefitShmTransport, ChildOversizedBucketIsTheChildsErrorAndReachesTheReceiver) {
  ShmTransport transport(2, 4096);
  ChildProcess child([&] {
    Bucket big;
    big.entries = {{{"a", DType::U8, {4097}}, 0, 4097}};
    big.payload.resize(4097);
    try {
      transport.sender(1).send(std::move(big));
    } catch (const Error& e) {
      transport.sender(1).fail(e.what());  // what stream_shard does: the receiver must not wait
      throw;
    }
  });
  transport.set_sender_alive(child.liveness());
  EXPECT_EQ(child.wait(),
            exited_with(kChildError, "mismatch: refit: rank 1: bucket of 4097 B exceeds bucket_size_bytes 4096 B"));
  std::vector<uint8_t> sink(4096);
  EXPECT_EQ(error_message([&] { transport.receiver(1).receive(sink); }, ErrorKind::Io),
            "refit: rank 1: transport failed mid-stream: refit: rank 1: bucket of 4097 B exceeds bucket_size_bytes "
            "4096 B");
}

TEST(RefitShmTransport, ChildFailingMidStreamFailsTheAlignerNamingTheRank) {
  // rank 0: eight 64 B weights, one bucket; rank 1: eight 3000 B weights, one per bucket. The child sends rank 1's
  // first three buckets, then fails it with "boom".
  std::vector<std::vector<TensorSpec>> specs(2);
  for (size_t i = 0; i < 8; ++i) {
    specs[0].push_back({fmt_name(i), DType::U8, {64}});
    specs[1].push_back({fmt_name(i), DType::U8, {3000}});
  }
  const auto shards = make_shards(specs);
  ShmTransport transport(2, 4096);
  ChildProcess child([&] {
    transport.set_receiver_alive(parent_alive());
    std::thread rank0([&] { stream_shard(0, shards.weights(0), 4096, transport); });
    const auto buckets = pack(1, shards.weights(1), 4096);
    for (size_t b = 0; b < 3; ++b) transport.sender(1).send(buckets[b]);
    transport.sender(1).fail("boom");
    rank0.join();
  });
  transport.set_sender_alive(child.liveness());
  RefitLayout layout(shards.specs);
  BufferPool pool(4096, 2, kPoison);
  StreamAligner aligner(layout, transport, pool);
  hang_guard([&] {
    auto drain = [&] {
      while (aligner.next() != nullptr) {
      }
    };
    EXPECT_EQ(error_message(drain, ErrorKind::Io), "refit: rank 1: transport failed mid-stream: boom");
  });
  // Up to the three buckets sent before the failure may be delivered first (the failure wins once it is seen).
  EXPECT_GE(aligner.batches_delivered(), 1u);
  EXPECT_LE(aligner.batches_delivered(), 3u);
  EXPECT_EQ(child.wait(), exited_with(kChildReturned));
}

TEST(RefitShmTransport, ChildKilledMidStreamIsTheSenderExitedErrorNotAHang) {
  // Two ranks, forty 1000 B weights each, one per 1024 B bucket: aligned batch k is bucket k of both ranks.
  const auto shards = make_shards(equal_specs(2, 40, 1000));
  ShmTransport transport(2, 1024);
  ChildProcess child([&] {
    transport.set_receiver_alive(parent_alive());
    stream_every_rank(shards, 1024, transport);
  });
  transport.set_sender_alive(child.liveness());
  RefitLayout layout(shards.specs);
  BufferPool pool(1024, 2, kPoison);
  StreamAligner aligner(layout, transport, pool);
  hang_guard([&] {
    for (int i = 0; i < 3; ++i) ASSERT_NE(aligner.next(), nullptr);
    // Three buckets received per rank: the child fills both rings (3 + depth 2 published), then blocks.
    while (transport.buckets_published(0) < 5 || transport.buckets_published(1) < 5) std::this_thread::sleep_for(1ms);
    child.kill(SIGKILL);
    EXPECT_EQ(transport.buckets_published(0), 5u);
    EXPECT_EQ(transport.buckets_published(1), 5u);
    for (int i = 0; i < 2; ++i) ASSERT_NE(aligner.next(), nullptr);  // what was published is still delivered
    EXPECT_EQ(error_message([&] { aligner.next(); }, ErrorKind::Io),
              "refit: rank 0: transport failed mid-stream: sender process exited before finishing the stream");
  });
  EXPECT_EQ(aligner.batches_delivered(), 5u);
  EXPECT_EQ(child.wait(), killed_by(SIGKILL));
}

TEST(RefitShmTransport, ReceiverProcessKilledDoesNotHangTheSender) {
  const auto shards = make_shards(equal_specs(1, 20, 1000));
  ShmTransport transport(1, 1024);
  ChildProcess child([&] {
    transport.set_sender_alive(parent_alive());
    std::vector<uint8_t> sink(1024);
    transport.receiver(0).receive(sink);
    raise(SIGKILL);
  });
  transport.set_receiver_alive(child.liveness());
  hang_guard([&] {
    EXPECT_EQ(error_message([&] { stream_shard(0, shards.weights(0), 1024, transport); }, ErrorKind::Io),
              "refit: rank 0: receiver process exited before the end of the stream");
  });
  EXPECT_EQ(child.wait(), killed_by(SIGKILL));
}

TEST(RefitShmTransport, ReceiverDestroyingTheTransportReleasesTheSender) {
  const auto shards = make_shards(equal_specs(1, 20, 1000));
  auto transport = std::make_unique<ShmTransport>(1, 1024);
  ChildProcess child([&] {
    transport->set_receiver_alive(parent_alive());
    stream_shard(0, shards.weights(0), 1024, *transport);
  });
  transport->set_sender_alive(child.liveness());
  ChildOutcome outcome;
  hang_guard([&] {
    std::vector<uint8_t> sink(1024);
    const ReceivedBatch b = transport->receiver(0).receive(sink);
    EXPECT_FALSE(b.end);
    EXPECT_EQ(b.payload_bytes, 1000u);
    EXPECT_EQ(b.entries, (std::vector<WireEntry>{{{fmt_name(0), DType::U8, {1000}}, 0, 1000}}));
    EXPECT_TRUE(std::equal(shards.data[0][0].begin(), shards.data[0][0].end(), sink.begin()));
    transport.reset();  // the engine gives up after one bucket
    outcome = child.wait();
  });
  EXPECT_EQ(outcome,
            exited_with(kChildError, "io: refit: rank 0: receiver gave up: the receiving process closed the transport"));
}

TEST(RefitShmTransport, ReceiverCancelReleasesTheChildSender) {
  // What RefitMode does when a rank's apply fails: cancel that rank's receiver; the trainer stops sending.
  const auto shards = make_shards(equal_specs(1, 20, 1000));
  ShmTransport transport(1, 1024);
  ChildProcess child([&] {
    transport.set_receiver_alive(parent_alive());
    stream_shard(0, shards.weights(0), 1024, transport);
  });
  transport.set_sender_alive(child.liveness());
  const std::string gave_up = "refit: rank 0: receiver gave up: apply of 'layers.0.weight' failed";
  ChildOutcome outcome;
  hang_guard([&] {
    std::vector<uint8_t> sink(1024);
    EXPECT_FALSE(transport.receiver(0).receive(sink).end);
    transport.receiver(0).cancel("apply of 'layers.0.weight' failed");
    transport.receiver(0).cancel("a second reason is ignored");
    outcome = child.wait();
    // The sender failed its channel with the error it got, and the buckets still queued were dropped.
    EXPECT_EQ(error_message([&] { transport.receiver(0).receive(sink); }, ErrorKind::Io),
              "refit: rank 0: transport failed mid-stream: " + gave_up);
  });
  EXPECT_EQ(outcome, exited_with(kChildError, "io: " + gave_up));
  EXPECT_GE(transport.buckets_published(0), 1u);
  EXPECT_LE(transport.buckets_published(0), 3u);  // one received + a full ring of 2, never more
}

TEST(RefitShmTransport, EntriesNotFittingTheSlotHeaderAreRefused) {
  // Each entry takes 25 B + 15 B of name + 2 * 8 B of shape = 56 B: the second one crosses 100 B.
  ShmTransport transport(1, 4096, ShmTransportOptions{.depth = 2, .max_entries_bytes = 100});
  Bucket b;
  for (uint64_t i = 0; i < 3; ++i) b.entries.push_back({{fmt_name(i), DType::U8, {4, 2}}, 64 * i, 8});
  b.payload.resize(136);
  EXPECT_EQ(encoded_entry_bytes(b.entries[0]), 56u);
  EXPECT_EQ(error_message([&] { transport.sender(0).send(b); }, ErrorKind::Resource),
            "refit: rank 0: weight 'layers.1.weight' (entry 2 of 3) does not fit the slot header: the bucket's "
            "entries need 168 B, max_entries_bytes is 100 B");
  b.entries.pop_back();  // 112 B still does not fit; one entry does
  b.entries.pop_back();
  transport.sender(0).send(b);
  transport.sender(0).finish();
  std::vector<uint8_t> sink(4096);
  EXPECT_EQ(transport.receiver(0).receive(sink).entries, b.entries);
  EXPECT_TRUE(transport.receiver(0).receive(sink).end);
}

TEST(RefitShmTransport, RefusesABadSetup) {
  EXPECT_EQ(error_message([] { ShmTransport transport(0, 64); }, ErrorKind::Mismatch),
            "refit: shared-memory transport needs ranks >= 1, depth >= 1, bucket_size_bytes > 0, "
            "max_entries_bytes > 0 and wait_slice > 0 (got 0, 2, 64, 262144, 50 ms)");
  EXPECT_THROW(ShmTransport(1, 64, ShmTransportOptions{.depth = 0}), Error);
  EXPECT_THROW(ShmTransport(1, 0), Error);
  EXPECT_THROW(ShmTransport(1, 64, ShmTransportOptions{.depth = 2, .max_entries_bytes = 0}), Error);
  EXPECT_THROW(ShmTransport(1, 64, ShmTransportOptions{.depth = 2, .max_entries_bytes = 64, .wait_slice = 0ms}),
               Error);
}

TEST(RefitShmWire, EntriesRoundTripAndACorruptHeaderIsAFormatError) {
  const std::vector<WireEntry> entries{{{"a", DType::BF16, {3, 5}}, 0, 30},
                                       {{"scale", DType::F8_E8M0, {}}, 64, 1},
                                       {{"w.weight", DType::I64, {2, 3, 4}}, 128, 192}};
  std::vector<uint8_t> area;
  for (const auto& e : entries) area.resize(area.size() + encoded_entry_bytes(e));
  EXPECT_EQ(encode_entries(entries, area), area.size());
  EXPECT_EQ(decode_entries(0, area, 3), entries);
  EXPECT_EQ(error_message([&] { decode_entries(2, std::span<const uint8_t>(area).first(area.size() - 1), 3); },
                          ErrorKind::Format),
            "refit: rank 2: corrupt slot header: entry data ends at byte " + std::to_string(area.size() - 8) + " of " +
                std::to_string(area.size() - 1));
  EXPECT_THROW(decode_entries(0, area, 2), Error);        // bytes left over
  EXPECT_THROW(decode_entries(0, area, 1u << 30), Error);  // a count that cannot fit never sizes a vector
}

/// Endpoint semantics every transport shares, with the exact texts.
class RefitTransportEndpoints : public ::testing::TestWithParam<NamedTransport> {};

TEST_P(RefitTransportEndpoints, SameErrorsAndEndOfStream) {
  const auto transport = GetParam().make(3, 4096, 2);
  std::vector<uint8_t> sink(4096);
  std::vector<uint8_t> small(64);
  // rank 0: one bucket of 100 B, then the end; a too-small buffer consumes the bucket and refuses it.
  Bucket b;
  b.entries = {{{"a", DType::U8, {100}}, 0, 100}};
  b.payload.assign(100, 7);
  transport->sender(0).send(b);
  transport->sender(0).finish();
  EXPECT_EQ(error_message([&] { transport->receiver(0).receive(small); }, ErrorKind::Mismatch),
            "refit: rank 0: received bucket of 100 B exceeds the receive buffer of 64 B");
  for (int i = 0; i < 2; ++i) {
    const ReceivedBatch end = transport->receiver(0).receive(sink);
    EXPECT_TRUE(end.end);
    EXPECT_TRUE(end.entries.empty());
    EXPECT_EQ(end.payload_bytes, 0u);
  }
  EXPECT_EQ(error_message([&] { transport->sender(0).send(b); }, ErrorKind::State),
            "refit: rank 0: send after the stream was closed");
  // rank 1: oversized, then a bucket delivered, then failure wins over what is still queued.
  Bucket big;
  big.payload.resize(4097);
  EXPECT_EQ(error_message([&] { transport->sender(1).send(big); }, ErrorKind::Mismatch),
            "refit: rank 1: bucket of 4097 B exceeds bucket_size_bytes 4096 B");
  transport->sender(1).send(b);
  const ReceivedBatch got = transport->receiver(1).receive(sink);
  EXPECT_EQ(got.entries, b.entries);
  EXPECT_EQ(got.payload_bytes, 100u);
  EXPECT_EQ(std::count(sink.begin(), sink.begin() + 100, uint8_t{7}), 100);
  transport->sender(1).send(b);
  transport->sender(1).fail("lost");
  transport->sender(1).fail("second failure is ignored");
  transport->sender(1).finish();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(error_message([&] { transport->receiver(1).receive(sink); }, ErrorKind::Io),
              "refit: rank 1: transport failed mid-stream: lost");
  }
  EXPECT_EQ(error_message([&] { transport->sender(1).send(b); }, ErrorKind::State),
            "refit: rank 1: send after the stream was closed");
  // rank 2: an empty stream ends at once.
  transport->sender(2).finish();
  EXPECT_TRUE(transport->receiver(2).receive(sink).end);
}

TEST_P(RefitTransportEndpoints, CancelReleasesABlockedSenderAndDropsTheQueue) {
  const auto transport = GetParam().make(2, 1024, 2);
  const auto shards = make_shards(equal_specs(2, 20, 1000));
  std::string sender_error;
  hang_guard([&] {
    std::thread sender([&] {
      try {
        stream_shard(0, shards.weights(0), 1024, *transport);
      } catch (const Error& e) {
        sender_error = e.what();
      }
    });
    std::vector<uint8_t> sink(1024);
    EXPECT_FALSE(transport->receiver(0).receive(sink).end);  // streaming: it will fill the queue and wait
    transport->receiver(0).cancel("apply failed");
    transport->receiver(0).cancel("second reason");
    sender.join();
    EXPECT_EQ(error_message([&] { transport->receiver(0).receive(sink); }, ErrorKind::Io),
              "refit: rank 0: transport failed mid-stream: refit: rank 0: receiver gave up: apply failed");
  });
  EXPECT_EQ(sender_error, "refit: rank 0: receiver gave up: apply failed");
  // An empty reason reads "cancelled"; a cancelled channel refuses sends even with room.
  transport->receiver(1).cancel("");
  Bucket b;
  b.entries = {{{"a", DType::U8, {8}}, 0, 8}};
  b.payload.resize(8);
  EXPECT_EQ(error_message([&] { transport->sender(1).send(b); }, ErrorKind::Io),
            "refit: rank 1: receiver gave up: cancelled");
}

INSTANTIATE_TEST_SUITE_P(Transports, RefitTransportEndpoints, ::testing::ValuesIn(all_transports()),
                         transport_name);

}  // namespace
}  // namespace wsb::refit::test
