// Bad streams raise the exact same error on every receiver rank at once (no hang, no silent loop); each case is run
// under a hang guard only, over every transport (in-process queue, shared-memory ring): the texts are the same.
#include <gtest/gtest.h>

#include "tests/modes/refit/refit_test_util.hpp"

namespace wsb::refit::test {
namespace {

constexpr int kRanks = 3;
constexpr uint64_t kBucket = 1024;

std::vector<TensorSpec> rank_specs(int rank) {
  return {{"a", DType::BF16, {4, 8}}, {"b", DType::F32, {2, 2 + rank}}, {"c", DType::U8, {16}}};
}

/// A bucket carrying `specs` back to back (64 B aligned), bytes zero.
Bucket bucket_of(const std::vector<TensorSpec>& specs) {
  Bucket b;
  uint64_t cursor = 0;
  for (const auto& s : specs) {
    const uint64_t offset = (cursor + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
    b.entries.push_back({s, offset, s.bytes()});
    cursor = offset + s.bytes();
  }
  b.payload.resize(cursor);
  return b;
}

/// Rank `bad` sends `bad_stream` (then finishes unless `finish_bad` is false, in which case it fails with
/// "trainer rank lost"); the other ranks send their full shard in one bucket. Returns each rank's error text.
std::vector<std::string> run_case(const TransportFactory& make, int bad, const std::vector<Bucket>& bad_stream,
                                  bool finish_bad, ReceiveMode mode) {
  std::vector<std::vector<TensorSpec>> specs;
  for (int r = 0; r < kRanks; ++r) specs.push_back(rank_specs(r));
  std::vector<std::string> errors;
  hang_guard([&] {
    RefitLayout layout(specs);
    const auto made = make(kRanks, kBucket, 8);
    Transport& transport = *made;
    for (int r = 0; r < kRanks; ++r) {
      if (r != bad) {
        transport.sender(r).send(bucket_of(specs[static_cast<size_t>(r)]));
        transport.sender(r).finish();
      }
    }
    for (const auto& b : bad_stream) transport.sender(bad).send(b);
    if (finish_bad) {
      transport.sender(bad).finish();
    } else {
      transport.sender(bad).fail("trainer rank lost");
    }
    BufferPool pool(kBucket, (mode == ReceiveMode::Ahead ? 2 : 1) * kRanks, kPoison);
    StreamAligner aligner(layout, transport, pool, mode);
    RankReceiverGroup group(aligner);
    errors = on_every_rank(kRanks, [&](int rank) {
      while (group.next(rank)) {
      }
    });
  });
  return errors;
}

std::vector<std::string> all(const std::string& text) { return std::vector<std::string>(kRanks, text); }

class RefitStreamErrors : public ::testing::TestWithParam<NamedTransport> {
 protected:
  /// The errors of the case, which receiving ahead (each rank on its own thread) must raise word for word as well.
  std::vector<std::string> run(int bad, const std::vector<Bucket>& bad_stream, bool finish_bad = true) const {
    const auto inline_errors = run_case(GetParam().make, bad, bad_stream, finish_bad, ReceiveMode::Inline);
    EXPECT_EQ(run_case(GetParam().make, bad, bad_stream, finish_bad, ReceiveMode::Ahead), inline_errors)
        << "receiving ahead";
    return inline_errors;
  }
};

TEST_P(RefitStreamErrors, WellFormedStreamsEndWithoutError) {
  EXPECT_EQ(run(1, {bucket_of({rank_specs(1)[0]}), bucket_of({rank_specs(1)[1], rank_specs(1)[2]})}),
            all(""));
}

TEST_P(RefitStreamErrors, StreamEndingEarly) {
  EXPECT_EQ(run(2, {bucket_of({rank_specs(2)[0], rank_specs(2)[1]})}),
            all("refit: rank 2: stream ended after 2 of 3 weights; next expected weight 'c'"));
}

TEST_P(RefitStreamErrors, EmptyBatch) {
  EXPECT_EQ(run(1, {bucket_of({rank_specs(1)[0]}), Bucket{}}),
            all("refit: rank 1: empty transport batch #2 (next expected weight 'b')"));
}

TEST_P(RefitStreamErrors, WeightMissingOnOneRank) {
  EXPECT_EQ(run(0, {bucket_of({rank_specs(0)[0], rank_specs(0)[2]})}),
            all("refit: rank 0: weight 'b' missing (the stream has 'c' in its place)"));
}

TEST_P(RefitStreamErrors, UnknownWeight) {
  auto specs = rank_specs(1);
  specs[1].name = "b_typo";
  EXPECT_EQ(run(1, {bucket_of(specs)}), all("refit: rank 1: unknown weight 'b_typo' (not in the engine layout)"));
}

TEST_P(RefitStreamErrors, DuplicateWeight) {
  const auto s = rank_specs(2);
  EXPECT_EQ(run(2, {bucket_of({s[0], s[1]}), bucket_of({s[1], s[2]})}),
            all("refit: rank 2: duplicate weight 'b' (already received)"));
}

TEST_P(RefitStreamErrors, DtypeDifferingFromLayout) {
  auto s = rank_specs(1);
  s[0].dtype = DType::F16;
  EXPECT_EQ(run(1, {bucket_of(s)}),
            all("refit: rank 1: weight 'a' has dtype F16, the engine layout expects BF16"));
}

TEST_P(RefitStreamErrors, ShapeDifferingFromLayout) {
  auto s = rank_specs(2);
  s[1].shape = {2, 3};  // rank 1's shape arriving on rank 2
  EXPECT_EQ(run(2, {bucket_of(s)}),
            all("refit: rank 2: weight 'b' has shape [2, 3], the engine layout expects [2, 4]"));
}

TEST_P(RefitStreamErrors, TransportFailureMidStream) {
  EXPECT_EQ(run(1, {bucket_of({rank_specs(1)[0]})}, /*finish_bad=*/false),
            all("refit: rank 1: transport failed mid-stream: trainer rank lost"));
}

TEST_P(RefitStreamErrors, BatchAfterTheLastWeight) {
  const auto s = rank_specs(0);
  EXPECT_EQ(run(0, {bucket_of(s), bucket_of({s[2]})}),
            all("refit: rank 0: transport batch after the last weight (first entry 'c')"));
}

TEST_P(RefitStreamErrors, EntryOutsideTheReceivedBytes) {
  Bucket b = bucket_of(rank_specs(1));
  b.payload.resize(b.payload.size() - 1);
  EXPECT_EQ(run(1, {b}),
            all("refit: rank 1: weight 'c' declares 16 B at offset 128, expected 16 B inside the 143 B received"));
}

TEST_P(RefitStreamErrors, AbortFromOneRankReachesEveryRank) {
  std::vector<std::vector<TensorSpec>> specs;
  for (int r = 0; r < kRanks; ++r) specs.push_back(rank_specs(r));
  const auto shards = make_shards(specs);
  std::vector<std::string> errors;
  hang_guard([&] {
    RefitLayout layout(specs);
    const auto made = GetParam().make(kRanks, 128, 2);  // several batches per rank
    Transport& transport = *made;
    BufferPool pool(128, kRanks, kPoison);
    StreamAligner aligner(layout, transport, pool);
    RankReceiverGroup group(aligner);
    Senders senders(shards, 128, transport);
    errors = on_every_rank(kRanks, [&](int rank) {
      while (auto b = group.next(rank)) {
        if (rank == 1 && b->sequence == 1) {
          group.abort(1, ErrorKind::Fatal, "apply of 'b' failed");
          throw Error(ErrorKind::Fatal, "refit: rank 1: aborted: apply of 'b' failed");
        }
      }
    });
    // Unblock the senders: the receivers stopped reading.
    for (int r = 0; r < kRanks; ++r) {
      while (true) {
        std::vector<uint8_t> sink(128);
        try {
          if (transport.receiver(r).receive(sink).end) break;
        } catch (const Error&) {
          break;
        }
      }
    }
  });
  EXPECT_EQ(errors, all("refit: rank 1: aborted: apply of 'b' failed"));
}

TEST_P(RefitStreamErrors, ErrorIsStickyAcrossCalls) {
  std::vector<std::vector<TensorSpec>> specs;
  for (int r = 0; r < kRanks; ++r) specs.push_back(rank_specs(r));
  hang_guard([&] {
    RefitLayout layout(specs);
    const auto made = GetParam().make(kRanks, kBucket, 2);
    Transport& transport = *made;
    for (int r = 0; r < kRanks; ++r) transport.sender(r).finish();
    BufferPool pool(kBucket, kRanks, kPoison);
    StreamAligner aligner(layout, transport, pool);
    const std::string want = "refit: rank 0: stream ended after 0 of 3 weights; next expected weight 'a'";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(wsb::test::error_message([&] { aligner.next(); }, ErrorKind::Missing), want);
    EXPECT_EQ(pool.outstanding(), 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, RefitStreamErrors, ::testing::ValuesIn(all_transports()), transport_name);

}  // namespace
}  // namespace wsb::refit::test
