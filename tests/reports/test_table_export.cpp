// CSV and JSON forms of a table, and the named table set of a results file.
#include "reports/table_export.hpp"

#include <gtest/gtest.h>

#include "reports/report_tables.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

Table sample() {
  Table t;
  t.columns = {{"Name", MetricKind::Text}, {"n", MetricKind::Count}, {"time", MetricKind::Duration},
               {"range", MetricKind::DurationRange}, {"mean", MetricKind::DurationMeanCI}};
  t.rows = {{std::string("a,\"b\""), 3.0, 0.5, Range{0.25, 0.75}, MeanCI{2.0, 0.125}},
            {std::string("c"), Value{}, Value{}, Value{}, MeanCI{1.0, std::nullopt}}};
  return t;
}

TEST(ReportsTableExport, CsvSplitsRangesAndMeansAndQuotes) {
  EXPECT_EQ(render_csv(sample()),
            "Name,n,time (s),range min (s),range max (s),mean mean (s),mean half-width (s)\n"
            "\"a,\"\"b\"\"\",3,0.5,0.25,0.75,2,0.125\n"
            "c,,,,,1,\n");
}

TEST(ReportsTableExport, JsonKeepsNumbersAndNulls) {
  const nlohmann::json j = table_json(sample());
  EXPECT_EQ(j["columns"][2], (nlohmann::json{{"header", "time"}, {"kind", "duration"}, {"unit", "s"}}));
  EXPECT_EQ(j["rows"][0], nlohmann::json::parse(R"(["a,\"b\"", 3.0, 0.5, {"min": 0.25, "max": 0.75},
                                                   {"mean": 2.0, "half_width": 0.125}])"));
  EXPECT_EQ(j["rows"][1], nlohmann::json::parse(R"(["c", null, null, null, {"mean": 1.0, "half_width": null}])"));
}

TEST(ReportsTableExport, TableSetTitlesAndFormats) {
  const Results r = testing::two_cell_results();
  std::vector<std::string> titles;
  for (const NamedTable& t : report_tables(r)) titles.push_back(t.title);
  EXPECT_EQ(titles, (std::vector<std::string>{"Summary", "Checks", "Memory"}));  // one host, no phases
  EXPECT_EQ(parse_table_format("csv"), TableFormat::Csv);
  EXPECT_EQ(parse_table_format("yaml"), std::nullopt);
  const std::string csv = render_tables(r, TableFormat::Csv);
  EXPECT_EQ(csv.substr(0, csv.find('\n', csv.find('\n') + 1) + 1),
            "# Summary\nModel,Mode,Runtime,n,Pause range min (s),Pause range max (s),Pause \u2264 commit call min (s),"
            "Pause \u2264 commit call max (s),Max stall range min (s),Max stall range max (s),Complete loop range min (s),"
            "Complete loop range max (s),Checks\n");
  const nlohmann::json j = nlohmann::json::parse(render_tables(r, TableFormat::Json));
  ASSERT_EQ(j["tables"].size(), 3u);
  EXPECT_EQ(j["tables"][0]["title"], "Summary");
  EXPECT_EQ(j["tables"][0]["rows"][0][4], (nlohmann::json{{"min", 0.512}, {"max", 0.530}}));
}

}  // namespace
}  // namespace wsb
