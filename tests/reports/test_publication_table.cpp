// The Publications table of cells on real checkpoints: the target publication's encoding, density overall and per
// class, stored bytes, compression and source; shown only when some cell ran on a checkpoint.
#include "reports/publication_table.hpp"

#include <gtest/gtest.h>

#include "reports/report_markdown.hpp"
#include "reports/report_tables.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

Cell on_checkpoint(const std::string& model, const std::string& mode, bool real_delta) {
  Cell c = testing::cell(model, mode, "native", 2, "h1", {{0.01, 0.1}});
  c.extra["checkpoint"] = "/ckpt/step0";
  c.extra["target"] = 1;
  if (real_delta) c.extra["checkpoints"] = nlohmann::json::array({"/ckpt/step1"});
  nlohmann::json v1 = {{"version", 1},
                       {"full", false},
                       {"stored_bytes", 57430},
                       {"density", 0.2756},
                       {"compression_ratio", 4.366},
                       {"encoding", "xor"},
                       {"source", real_delta ? "/ckpt/step1" : "/ckpt/step0"},
                       {"changes",
                        {{"BF16", {{"elements", 100}, {"changed", 30}, {"density", 0.3}}},
                         {"F32", {{"elements", 10}, {"changed", 0}, {"density", 0.0}}}}}};
  c.extra["publications"] = nlohmann::json::array({{{"version", 0}, {"full", true}}, v1});
  return c;
}

TEST(PublicationTable, TheTargetPublicationOfEachCheckpointCell) {
  const Cell synthetic = testing::cell("llama-tiny-bf16", "cpu", "native", 2, "h1", {{0.01, 0.1}});
  const std::vector<Cell> cells{synthetic, on_checkpoint("hf:step0", "disk", false),
                                on_checkpoint("hf:step0..step1", "cpu", true)};
  EXPECT_TRUE(any_checkpoint_cell(cells));
  EXPECT_FALSE(any_checkpoint_cell(std::vector<Cell>{synthetic}));
  EXPECT_EQ(render_text(publication_table(cells)),
            "# Model            Mode  Runtime  Version  Encoding  Changed  By class                  Stored  Compression  "
            "Source\n"
            "#                                                        (%)\n"
            "  hf:step0         disk  native         1  xor         27.56  BF16 30.00%, F32 0.00%  57.43 kB         4.37  "
            "synthetic on /ckpt/step0\n"
            "  hf:step0..step1  cpu   native         1  xor         27.56  BF16 30.00%, F32 0.00%  57.43 kB         4.37  "
            "/ckpt/step1\n");
}

TEST(PublicationTable, ReportsShowItOnlyWithACheckpointCell) {
  Results r = testing::two_cell_results();
  EXPECT_EQ(render_report_markdown(r).find("## Publications"), std::string::npos);
  for (const NamedTable& t : report_tables(r)) EXPECT_NE(t.title, "Publications");
  r.cells.push_back(on_checkpoint("hf:step0..step1", "cpu", true));
  EXPECT_NE(render_report_markdown(r).find("## Publications"), std::string::npos);
  EXPECT_NE(render_tables(r, TableFormat::Text).find("## Publications\n"), std::string::npos);
  EXPECT_EQ(report_tables(r)[3].title, "Publications");
}

}  // namespace
}  // namespace wsb
