// The Refit table: per sender rank, the buckets and bytes each refit streamed (a trial's refit_streams), shown only
// when some trial recorded them.
#include "reports/refit_table.hpp"

#include <gtest/gtest.h>

#include "reports/report_markdown.hpp"
#include "reports/report_tables.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

// The smoke matrix's two refit cells of the tiny Llama at TP 2 differ only in bucket_bytes; their plans are
// tests/modes/refit/test_sender_and_pool.cpp PlansTheTinyLlamaStreamsPerRank.
Cell refit_cell(uint64_t bucket, uint64_t buckets0, uint64_t buckets1, uint64_t bytes) {
  Cell c = testing::cell("llama-tiny-bf16", "refit", "native", 2, "h1", {{0.01, 0.1}, {0.02, 0.1}});
  c.sync.refit.bucket_bytes = bucket;
  c.id += bucket == 0 ? "" : "/bucket" + std::to_string(bucket);
  for (Trial& t : c.trials) t.refit_streams = {{0, buckets0, bytes, {}}, {1, buckets1, bytes, {}}};
  return c;
}

TEST(RefitTable, BucketsAndBytesPerRankOfEachRefitCell) {
  const Cell disk = testing::cell("llama-tiny-bf16", "disk", "native", 2, "h1", {{0.01, 0.1}});
  const std::vector<Cell> cells{disk, refit_cell(131072, 4, 4, 427264), refit_cell(262144, 2, 2, 427264),
                                refit_cell(0, 1, 1, 427264)};
  EXPECT_TRUE(any_refit_streams(cells));
  EXPECT_FALSE(any_refit_streams(std::vector<Cell>{disk}));
  EXPECT_EQ(render_text(refit_table(cells)),
            "# Cell                                           Mode             Bucket  Buckets per rank  Streamed per rank\n"
            "  llama-tiny-bf16/refit/native/tp2/bucket131072  refit+inproc  131.07 kB  4, 4              "
            "427.26 kB, 427.26 kB\n"
            "  llama-tiny-bf16/refit/native/tp2/bucket262144  refit+inproc  262.14 kB  2, 2              "
            "427.26 kB, 427.26 kB\n"
            "  llama-tiny-bf16/refit/native/tp2               refit+inproc        n/a  1, 1              "
            "427.26 kB, 427.26 kB\n");
}

TEST(RefitTable, ReportsShowItOnlyWithRefitStreams) {
  Results r = testing::two_cell_results();
  EXPECT_EQ(render_report_markdown(r).find("## Refit"), std::string::npos);
  for (const NamedTable& t : report_tables(r)) EXPECT_NE(t.title, "Refit");
  r.cells.push_back(refit_cell(131072, 4, 4, 427264));
  EXPECT_NE(render_report_markdown(r).find("## Refit\n"), std::string::npos);
  EXPECT_NE(render_tables(r, TableFormat::Text).find("## Refit\n"), std::string::npos);
  EXPECT_EQ(report_tables(r)[3].title, "Refit");
}

}  // namespace
}  // namespace wsb
