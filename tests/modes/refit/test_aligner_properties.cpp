// Properties of the refit stream aligner over randomized per-rank bucket layouts: global order, exactly-once
// delivery, byte-exact payloads read from poisoned recycled buffers, at most one outstanding batch per rank (two when
// each rank receives ahead on its own thread, which delivers the very same batches), every dtype group delivered,
// payload index i == rank i; over the in-process and the shared-memory transport.
#include <gtest/gtest.h>

#include <set>

#include "tests/modes/refit/refit_run.hpp"

namespace wsb::refit::test {
namespace {

/// Every property holds over every transport (in-process queue, shared-memory ring).
class RefitAligner : public ::testing::TestWithParam<NamedTransport> {
 protected:
  std::unique_ptr<Transport> make(int ranks, uint64_t bucket_bytes) const {
    return GetParam().make(ranks, bucket_bytes, 2);
  }
};

TEST_P(RefitAligner, RandomLayoutsPreserveGlobalOrderAndDeliverEachWeightOnce) {
  std::mt19937 rng(20240608);
  int differing = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int ranks = 1 + static_cast<int>(rng() % 4);
    const size_t weights = 1 + rng() % 40;
    const uint64_t bucket = 256 + rng() % 4096;
    const auto shards = make_shards(random_specs(rng, ranks, weights, bucket));
    hang_guard([&] {
      const RunRecord rec = run_and_check(shards, bucket, GetParam().make);
      const RunRecord ahead = run_and_check(shards, bucket, GetParam().make, ReceiveMode::Ahead);
      EXPECT_EQ(ahead.names, rec.names) << "trial " << trial;
      EXPECT_EQ(ahead.batches, rec.batches) << "trial " << trial;
      EXPECT_EQ(ahead.bytes, rec.bytes) << "trial " << trial;
      EXPECT_EQ(ahead.transport_batches, rec.transport_batches) << "trial " << trial;
      EXPECT_EQ(ahead.transport_bytes, rec.transport_bytes) << "trial " << trial;
      EXPECT_LE(ahead.max_outstanding, static_cast<size_t>(2 * ranks)) << "trial " << trial;
      std::vector<std::string> expected;
      for (size_t i = 0; i < weights; ++i) expected.push_back(fmt_name(i));
      EXPECT_EQ(rec.names, expected) << "trial " << trial;
      EXPECT_EQ(std::set<std::string>(rec.names.begin(), rec.names.end()).size(), weights);
      EXPECT_LE(rec.max_outstanding, static_cast<size_t>(ranks)) << "trial " << trial;
      EXPECT_EQ(rec.bytes, total_weight_bytes(shards)) << "trial " << trial;
      EXPECT_EQ(rec.batches, expected_aligned_batches(shards, bucket)) << "trial " << trial;
      const SenderPlan plan = sender_plan(shards, bucket);
      EXPECT_EQ(rec.transport_batches, plan.batches) << "trial " << trial;
      EXPECT_EQ(rec.transport_bytes, plan.bytes) << "trial " << trial;
      if (rec.boundaries_differ) ++differing;
    });
    if (HasFailure()) return;
  }
  EXPECT_GE(differing, 20);  // the property was exercised with misaligned per-rank boundaries, not only aligned ones
}

TEST_P(RefitAligner, UnevenShardsSplitAlignedBatchesAtEveryRanksBoundary) {
  // Buckets of 192 B, offsets 64 B aligned. rank 0: four 64 B weights -> [w0 w1 w2] [w3]; rank 1: w0, w2 of 128 B
  // and w1, w3 of 32 B -> [w0 w1] [w2 w3]. Aligned: {w0 w1} (rank 1 ends), {w2} (rank 0 ends), {w3}.
  std::vector<std::vector<TensorSpec>> specs(2);
  for (size_t i = 0; i < 4; ++i) {
    specs[0].push_back({fmt_name(i), DType::U8, {64}});
    specs[1].push_back({fmt_name(i), DType::U8, {i % 2 == 0 ? 128 : 32}});
  }
  const auto shards = make_shards(specs);
  std::vector<std::vector<std::string>> batches;
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    const auto transport = make(2, 192);
    BufferPool pool(192, 2, kPoison);
    StreamAligner aligner(layout, *transport, pool);
    Senders senders(shards, 192, *transport);
    while (const AlignedBatch* b = aligner.next()) batches.emplace_back(b->names.begin(), b->names.end());
  });
  const std::vector<std::vector<std::string>> expected{
      {fmt_name(0), fmt_name(1)}, {fmt_name(2)}, {fmt_name(3)}};
  EXPECT_EQ(plan_buckets(0, shards.weights(0), 192).size(), 2u);
  EXPECT_EQ(plan_buckets(1, shards.weights(1), 192).size(), 2u);
  EXPECT_EQ(batches, expected);
}

TEST_P(RefitAligner, MultiDtypeBatchesDeliverEveryDtypeGroup) {
  // One bucket per rank holding five dtypes, BF16 and F16 (same width) interleaved.
  std::vector<std::vector<TensorSpec>> specs(2);
  const DType order[] = {DType::BF16, DType::F32, DType::F16, DType::U8, DType::BF16, DType::F8_E4M3, DType::F16};
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < 7; ++i) specs[static_cast<size_t>(r)].push_back({fmt_name(i), order[i], {4, 2 + r}});
  }
  const auto shards = make_shards(specs);
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    const auto transport = make(2, 4096);
    BufferPool pool(4096, 2, kPoison);
    StreamAligner aligner(layout, *transport, pool);
    Senders senders(shards, 4096, *transport);
    const AlignedBatch* b = aligner.next();
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->names.size(), 7u);
    for (int r = 0; r < 2; ++r) {
      const auto groups = b->dtype_groups(r);
      ASSERT_EQ(groups.size(), 5u) << "rank " << r;
      EXPECT_EQ(groups[0], (std::pair<DType, std::vector<size_t>>{DType::BF16, {0, 4}}));
      EXPECT_EQ(groups[1], (std::pair<DType, std::vector<size_t>>{DType::F32, {1}}));
      EXPECT_EQ(groups[2], (std::pair<DType, std::vector<size_t>>{DType::F16, {2, 6}}));
      EXPECT_EQ(groups[3], (std::pair<DType, std::vector<size_t>>{DType::U8, {3}}));
      EXPECT_EQ(groups[4], (std::pair<DType, std::vector<size_t>>{DType::F8_E4M3, {5}}));
      for (const auto& [dtype, ks] : groups) {
        for (size_t k : ks) {
          EXPECT_EQ(b->payloads[static_cast<size_t>(r)][k].spec->dtype, dtype);
          EXPECT_EQ(b->payloads[static_cast<size_t>(r)][k].bytes[0], pattern_byte(r, k, 0));
        }
      }
    }
    EXPECT_EQ(aligner.next(), nullptr);
  });
}

TEST_P(RefitAligner, ReceivingAheadNeedsTwoBuffersPerRank) {
  std::vector<std::vector<TensorSpec>> specs(3, {{fmt_name(0), DType::U8, {64}}});
  RefitLayout layout(specs);
  const auto transport = make(3, 192);
  BufferPool pool(192, 5, kPoison);
  EXPECT_EQ(wsb::test::error_text([&] { StreamAligner(layout, *transport, pool, ReceiveMode::Ahead); }),
            "refit: receive buffer pool has 5 buffers, 3 ranks need 6 (two each to receive ahead)");
}

TEST_P(RefitAligner, AReceiveAheadStillRunningIsCancelledWhenTheAlignerGoes) {
  // Rank 0 sends one of its two buckets and then waits: the aligner, gone after its first batch, must stop that
  // rank's receive thread (its receiver cancelled, so the sender's next send fails) rather than wait for it.
  std::vector<std::vector<TensorSpec>> specs(1);
  for (size_t i = 0; i < 2; ++i) specs[0].push_back({fmt_name(i), DType::U8, {64}});
  const auto shards = make_shards(specs);
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    const auto transport = make(1, 64);
    BufferPool pool(64, 2, kPoison);
    const auto plan = plan_buckets(0, shards.weights(0), 64);
    ASSERT_EQ(plan.size(), 2u);
    Bucket first;
    first.entries = plan[0];
    first.payload = shards.data[0][0];
    transport->sender(0).send(std::move(first));
    {
      StreamAligner aligner(layout, *transport, pool, ReceiveMode::Ahead);
      const AlignedBatch* b = aligner.next();
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(b->names.size(), 1u);
    }
    Bucket second;
    second.entries = plan[1];
    second.payload = shards.data[0][1];
    EXPECT_EQ(wsb::test::error_text([&] { transport->sender(0).send(std::move(second)); }),
              "refit: rank 0: receiver gave up: refit: the receivers stopped");
    EXPECT_EQ(pool.outstanding(), 0u);
  });
}

TEST_P(RefitAligner, ReceiveThreadsOfManyRanksStartAndStopIdle) {
  // Many ranks: each receive thread starts while the constructor is still starting the ones after it, which is
  // where a thread reading aligner state still being built would crash (and where ThreadSanitizer reports it on
  // every run). An aligner gone before any receive was asked lends no buffer and cancels no receiver: every sender
  // can still send.
  const int ranks = 33;
  std::vector<std::vector<TensorSpec>> specs(ranks, {{fmt_name(0), DType::U8, {64}}});
  hang_guard([&] {
    RefitLayout layout(specs);
    const auto transport = make(ranks, 64);
    BufferPool pool(64, 2 * ranks, kPoison);
    for (int i = 0; i < 20; ++i) {
      StreamAligner aligner(layout, *transport, pool, ReceiveMode::Ahead);
    }
    EXPECT_EQ(pool.max_outstanding(), 0u);
    const auto shards = make_shards(specs);
    for (int r = 0; r < ranks; ++r) {
      Bucket bucket;
      bucket.entries = plan_buckets(r, shards.weights(r), 64).at(0);
      bucket.payload = shards.data[static_cast<size_t>(r)][0];
      EXPECT_NO_THROW(transport->sender(r).send(std::move(bucket))) << "rank " << r;
    }
  });
}

TEST_P(RefitAligner, PayloadIndexIsTheRankOnEveryThread) {
  // Shards filled with their rank id; four receiver threads, each must see only its own id, each receiving ahead on
  // a thread of its own.
  std::mt19937 rng(7);
  const int ranks = 4;
  const auto shards = make_shards(random_specs(rng, ranks, 25, 700), /*fill_rank_id=*/true);
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    const auto transport = make(ranks, 1024);
    BufferPool pool(1024, 2 * ranks, kPoison);
    StreamAligner aligner(layout, *transport, pool, ReceiveMode::Ahead);
    RankReceiverGroup group(aligner);
    Senders senders(shards, 1024, *transport);
    std::vector<uint64_t> weights_seen(ranks, 0);
    const auto errors = on_every_rank(ranks, [&](int rank) {
      while (auto b = group.next(rank)) {
        for (size_t k = 0; k < b->weights.size(); ++k) {
          const auto& v = b->weights[k];
          EXPECT_EQ(*v.spec, shards.specs[static_cast<size_t>(rank)][b->first_weight + k]);
          // EXPECT, never ASSERT, inside a rank loop: a rank that returned early would strand the others.
          EXPECT_EQ(std::count(v.bytes.begin(), v.bytes.end(), static_cast<uint8_t>(rank)),
                    static_cast<std::ptrdiff_t>(v.bytes.size()))
              << "rank " << rank << " weight " << b->names[k];
          ++weights_seen[static_cast<size_t>(rank)];
        }
      }
    });
    EXPECT_EQ(errors, std::vector<std::string>(ranks, ""));
    EXPECT_EQ(weights_seen, std::vector<uint64_t>(ranks, 25));
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, RefitAligner, ::testing::ValuesIn(all_transports()), transport_name);

}  // namespace
}  // namespace wsb::refit::test
