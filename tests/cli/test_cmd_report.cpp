// `wsbench report` table / merge / compare / trace: exit codes, outputs, and bad input that writes nothing.
#include "cli/cmd_report.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "reports/results_io.hpp"
#include "reports/results_json.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

Cell cell(const std::string& host, const std::string& mode, double pause, bool pass = true) {
  Cell c;
  c.model = "m";
  c.sync = SyncOptions{parse_sync_mode(mode)};
  c.runtime = "native";
  c.engine = "embedded-cpu";
  c.tp = 2;
  c.id = "m/" + mode + "/native/tp2";
  c.host = host;
  c.n = 2;
  for (int i = 0; i < 2; ++i) {
    Trial t;
    t.index = i;
    t.times_s = {{"pause", pause}, {"envelope", 10 * pause}, {"prepare", 2.0}, {"commit", 0.5},
                 {"native_load", 1.0}};
    t.checks = {Check{"probes_exact", pass, pass ? "" : "fingerprint differs", json::object()}};
    t.status = pass ? Status::Pass : Status::Fail;
    c.trials.push_back(t);
  }
  c.status = pass ? Status::Pass : Status::Fail;
  return c;
}

fs::path write(const TempDir& dir, const std::string& name, const std::string& host, std::vector<Cell> cells) {
  Results r;
  r.context.host = host;
  r.matrix = "smoke";
  r.cells = std::move(cells);
  save_results(dir / name, r);
  return dir / name;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(HarnessCmdReport, CompareExitCodes) {
  TempDir dir;
  std::ostringstream out;
  const fs::path base = write(dir, "base.json", "a", {cell("a", "cpu", 1.0)});
  const fs::path slow = write(dir, "slow.json", "a", {cell("a", "cpu", 1.11)});
  const fs::path near = write(dir, "near.json", "a", {cell("a", "cpu", 1.09)});
  const fs::path failed = write(dir, "failed.json", "a", {cell("a", "cpu", 1.0, false)});
  EXPECT_EQ(report_compare(base, slow, "10%", "text", "", out), 1);
  EXPECT_EQ(report_compare(base, near, "10%", "text", "", out), 0);
  EXPECT_EQ(report_compare(base, slow, "0.2", "text", "", out), 0);
  out.str("");
  EXPECT_EQ(report_compare(base, failed, "10%", "text", "", out), 1);
  EXPECT_NE(out.str().find("candidate check failed: m/cpu/native/tp2 on a: probes_exact: fingerprint differs\n"),
            std::string::npos);
  EXPECT_NE(out.str().find("compare: FAIL (max regression 10%)\n"), std::string::npos);
  const fs::path other = write(dir, "other.json", "a", {cell("a", "disk", 1.0)});
  EXPECT_EQ(error_of([&] { report_compare(base, other, "10%", "text", "", out); }),
            "configurations differ: m/cpu/native/tp2: in baseline only (baseline " + base.string() + ", candidate " +
                other.string() + ")");
  EXPECT_EQ(parse_regression_threshold("10%"), 0.10);
  EXPECT_EQ(parse_regression_threshold("0.25"), 0.25);
  EXPECT_EQ(error_of([] { parse_regression_threshold("10"); }),
            "--max-regression: '10' is ambiguous: write \"10%\" for a percentage or a fraction <= 1 such as \"0.1\"");
  EXPECT_EQ(error_of([] { parse_regression_threshold("ten"); }),
            "--max-regression: 'ten' is not a non-negative percentage (\"10%\") or fraction (\"0.1\")");
}

TEST(HarnessCmdReport, MergeCountsHostsByContextAndIsReadableByTable) {
  TempDir dir;
  std::ostringstream out;
  const fs::path a1 = write(dir, "a1.json", "a", {cell("a", "cpu", 1.0)});
  const fs::path a2 = write(dir, "a2.json", "a", {cell("a", "disk", 2.0)});
  const fs::path b = write(dir, "b.json", "b", {cell("b", "cpu", 3.0)});
  EXPECT_EQ(report_merge({a1, a2}, dir / "one.json", out), 0);
  EXPECT_EQ(load_results(dir / "one.json").hosts.size(), 1u);  // two results of one host = one host
  EXPECT_EQ(error_of([&] { report_merge({a1, b, a1}, dir / "dup.json", out); }),
            a1.string() + ": given twice: each results file may be merged once");
  EXPECT_FALSE(fs::exists(dir / "dup.json"));
  EXPECT_EQ(report_merge({a1, a2, b}, dir / "fleet.json", out), 0);
  EXPECT_NE(out.str().find("merged 3 files: 2 hosts, 3 cells -> "), std::string::npos);
  out.str("");
  EXPECT_EQ(report_table({dir / "fleet.json"}, "markdown", "", "", out), 0);
  EXPECT_NE(out.str().find("\n## Fleet means\n"), std::string::npos);
  EXPECT_EQ(report_table({dir / "fleet.json"}, "csv", dir / "t.csv", "", out), 0);
  EXPECT_TRUE(fs::exists(dir / "t.csv"));
}

TEST(HarnessCmdReport, BadInputNamesFileAndFieldAndWritesNothing) {
  TempDir dir;
  std::ostringstream out;
  const fs::path good = write(dir, "good.json", "a", {cell("a", "cpu", 1.0)});
  json doc = json::parse(std::ifstream(good));
  doc["schema_version"] = 2;
  std::ofstream(dir / "v2.json") << doc.dump();
  doc["schema_version"] = 1;
  doc["cells"][0].erase("mode");
  std::ofstream(dir / "nomode.json") << doc.dump();
  std::ofstream(dir / "broken.json") << "{\"schema_version\": 1,";
  const fs::path v2 = dir / "v2.json";
  EXPECT_EQ(error_of([&] { report_table({good, v2}, "text", dir / "t.txt", dir / "r.md", out); }),
            v2.string() + ": schema_version 2 is not supported (this wsbench reads 1)");
  EXPECT_EQ(error_of([&] { report_merge({good, dir / "nomode.json"}, dir / "m.json", out); }),
            (dir / "nomode.json").string() + ": cell 'm/cpu/native/tp2': missing required field 'mode'");
  EXPECT_EQ(error_of([&] { report_compare(good, dir / "broken.json", "10%", "text", dir / "c.txt", out); })
                .rfind((dir / "broken.json").string() + ": not valid JSON: ", 0),
            0u);
  EXPECT_EQ(error_of([&] { report_trace(v2, "m/cpu/native/tp2", 0, dir / "trace.json"); }),
            v2.string() + ": schema_version 2 is not supported (this wsbench reads 1)");
  for (const char* name : {"t.txt", "r.md", "m.json", "c.txt", "trace.json"}) EXPECT_FALSE(fs::exists(dir / name)) << name;
  EXPECT_EQ(out.str(), "");
}

TEST(HarnessCmdReport, TraceWritesChromeTraceOfOneTrial) {
  TempDir dir;
  const fs::path good = write(dir, "good.json", "a", {cell("a", "cpu", 0.25)});
  EXPECT_EQ(report_trace(good, "m/cpu/native/tp2", 1, dir / "trace.json"), 0);
  const json trace = json::parse(std::ifstream(dir / "trace.json"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::map<std::string, double> dur;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") dur[e["name"].get<std::string>()] = e["dur"].get<double>();
  }
  EXPECT_EQ(dur, (std::map<std::string, double>{{"native_load", 1e6}, {"prepare", 2e6}, {"commit", 5e5},
                                                 {"pause", 2.5e5}}));
  EXPECT_EQ(trace["otherData"]["trial"], 1);
  EXPECT_EQ(error_of([&] { report_trace(good, "m/cpu/native/tp2", 5, dir / "t2.json"); }),
            good.string() + ": cell 'm/cpu/native/tp2' has no trial 5 (trials: 0, 1)");
  EXPECT_FALSE(fs::exists(dir / "t2.json"));
}

}  // namespace
}  // namespace wsb
