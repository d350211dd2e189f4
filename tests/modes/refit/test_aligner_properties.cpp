// Properties of the refit stream aligner over randomized per-rank bucket layouts: global order, exactly-once
// delivery, byte-exact payloads read from poisoned recycled buffers, at most one outstanding batch per rank, every
// dtype group delivered, payload index i == rank i.
#include <gtest/gtest.h>

#include <set>

#include "tests/modes/refit/refit_test_util.hpp"

namespace wsb::refit::test {
namespace {

struct RunRecord {
  std::vector<std::string> names;  // delivered, in order
  uint64_t batches = 0;
  bool boundaries_differ = false;  // some batch was cut short by another rank's boundary
  size_t max_outstanding = 0;
};

/// One refit through the single-threaded aligner; checks every payload byte at delivery time.
RunRecord run_and_check(const Shards& shards, uint64_t bucket_bytes) {
  const int ranks = static_cast<int>(shards.specs.size());
  RefitLayout layout(shards.specs);
  InProcTransport transport(ranks, bucket_bytes);
  BufferPool pool(bucket_bytes, static_cast<size_t>(ranks), kPoison);
  StreamAligner aligner(layout, transport, pool);
  Senders senders(shards, bucket_bytes, transport);
  RunRecord rec;
  std::vector<size_t> plan_buckets_per_rank;
  for (int r = 0; r < ranks; ++r) plan_buckets_per_rank.push_back(plan_buckets(r, shards.weights(r), bucket_bytes).size());
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
  senders.join();
  size_t max_plan = 0;
  for (size_t n : plan_buckets_per_rank) max_plan = std::max(max_plan, n);
  rec.boundaries_differ = rec.batches > max_plan;
  rec.max_outstanding = pool.max_outstanding();
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(aligner.batches_delivered(), rec.batches);
  return rec;
}

TEST(RefitAligner, RandomLayoutsPreserveGlobalOrderAndDeliverEachWeightOnce) {
  std::mt19937 rng(20240608);
  int differing = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int ranks = 1 + static_cast<int>(rng() % 4);
    const size_t weights = 1 + rng() % 40;
    const uint64_t bucket = 256 + rng() % 4096;
    const auto shards = make_shards(random_specs(rng, ranks, weights, bucket));
    hang_guard([&] {
      const RunRecord rec = run_and_check(shards, bucket);
      std::vector<std::string> expected;
      for (size_t i = 0; i < weights; ++i) expected.push_back(fmt_name(i));
      EXPECT_EQ(rec.names, expected) << "trial " << trial;
      EXPECT_EQ(std::set<std::string>(rec.names.begin(), rec.names.end()).size(), weights);
      EXPECT_LE(rec.max_outstanding, static_cast<size_t>(ranks)) << "trial " << trial;
      if (rec.boundaries_differ) ++differing;
    });
    if (HasFailure()) return;
  }
  EXPECT_GE(differing, 20);  // the property was exercised with misaligned per-rank boundaries, not only aligned ones
}

TEST(RefitAligner, UnevenShardsSplitAlignedBatchesAtEveryRanksBoundary) {
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
    InProcTransport transport(2, 192);
    BufferPool pool(192, 2, kPoison);
    StreamAligner aligner(layout, transport, pool);
    Senders senders(shards, 192, transport);
    while (const AlignedBatch* b = aligner.next()) batches.emplace_back(b->names.begin(), b->names.end());
  });
  const std::vector<std::vector<std::string>> expected{
      {fmt_name(0), fmt_name(1)}, {fmt_name(2)}, {fmt_name(3)}};
  EXPECT_EQ(plan_buckets(0, shards.weights(0), 192).size(), 2u);
  EXPECT_EQ(plan_buckets(1, shards.weights(1), 192).size(), 2u);
  EXPECT_EQ(batches, expected);
}

TEST(RefitAligner, MultiDtypeBatchesDeliverEveryDtypeGroup) {
  // One bucket per rank holding five dtypes, BF16 and F16 (same width) interleaved.
  std::vector<std::vector<TensorSpec>> specs(2);
  const DType order[] = {DType::BF16, DType::F32, DType::F16, DType::U8, DType::BF16, DType::F8_E4M3, DType::F16};
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < 7; ++i) specs[static_cast<size_t>(r)].push_back({fmt_name(i), order[i], {4, 2 + r}});
  }
  const auto shards = make_shards(specs);
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    InProcTransport transport(2, 4096);
    BufferPool pool(4096, 2, kPoison);
    StreamAligner aligner(layout, transport, pool);
    Senders senders(shards, 4096, transport);
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

TEST(RefitAligner, PayloadIndexIsTheRankOnEveryThread) {
  // Shards filled with their rank id; four receiver threads, each must see only its own id.
  std::mt19937 rng(7);
  const int ranks = 4;
  const auto shards = make_shards(random_specs(rng, ranks, 25, 700), /*fill_rank_id=*/true);
  hang_guard([&] {
    RefitLayout layout(shards.specs);
    InProcTransport transport(ranks, 1024);
    BufferPool pool(1024, ranks, kPoison);
    StreamAligner aligner(layout, transport, pool);
    RankReceiverGroup group(aligner);
    Senders senders(shards, 1024, transport);
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

}  // namespace
}  // namespace wsb::refit::test
