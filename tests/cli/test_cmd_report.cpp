// `wsbench report` table / merge / compare / trace: exit codes, outputs, and bad input that writes nothing.
#include "cli/cmd_report.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "reports/gnuplot.hpp"
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

namespace wsb {
namespace {

namespace fs = std::filesystem;

const std::string kNights = std::string(WSBENCH_FIXTURES_DIR) + "/history/";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(CliReportHistory, WritesTablesAndPlotsAndFailsOnANewestRegression) {
  test::TempDir dir;
  std::ostringstream out, err;
  const std::vector<fs::path> inputs = {kNights + "night-3.json", kNights + "night-1.json", kNights + "night-2.json"};
  EXPECT_EQ(report_history(inputs, dir / "h", "pause,commit", "10%", "gnuplot", out, err), 1);
  const bool have_gnuplot = fs::exists(dir / "h/llama-tiny-bf16-disk-native-tp2-pause.svg");
  EXPECT_EQ(out.str(), fmt::format("regression: llama-tiny-bf16/disk/native/tp2 pause 1.25x the previous point "
                                   "(2026-12-03T02:00:00Z 3333333cccc)\n"
                                   "regression: llama-tiny-bf16/disk/native/tp2 commit 1.27x the previous point "
                                   "(2026-12-03T02:00:00Z 3333333cccc)\n"
                                   "history: 3 results files, 2 configurations, {} plots -> {}\n",
                                   have_gnuplot ? 4 : 0, (dir / "h/history.md").string()));
  const std::string md = slurp(dir / "h/history.md");
  EXPECT_NE(md.find("| 2026-12-03T02:00:00Z | 3333333cccc |     1 | 0.00400 |      n/a | 0.00110 |           3.64 |"
                    "        1.25 | REGRESSION (1.25x > 1.10x) |\n"),
            std::string::npos);
  EXPECT_EQ(md.find("### envelope"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "h/llama-tiny-bf16-cpu-native-tp2-commit.gp"));
  // A looser threshold: no regression, exit 0.
  EXPECT_EQ(report_history(inputs, dir / "h2", "pause,commit", "30%", "gnuplot", out, err), 0);
}

TEST(CliReportHistory, MissingGnuplotStillWritesTheTables) {
  test::TempDir dir;
  std::ostringstream out, err;
  const fs::path missing = dir / "bin/gnuplot";
  EXPECT_EQ(report_history({kNights + "night-1.json", kNights + "night-2.json"}, dir / "h", "pause", "10%",
                           missing.string(), out, err),
            0);
  EXPECT_EQ(err.str(), "report history: " + missing.string() +
                           " not found (install the Debian package gnuplot-nox): no plots drawn; the scripts are in " +
                           (dir / "h").string() + " (run gnuplot on each there)\n");
  const std::string md = slurp(dir / "h/history.md");
  EXPECT_EQ(md.find("!["), std::string::npos);
  EXPECT_NE(md.find("No plots: " + missing.string() + " was not found when this page was written"), std::string::npos);
  EXPECT_NE(md.find("| 2026-12-02T02:00:00Z | 2222222bbbb |     2 | 0.00320 |  0.00127 | 0.00110 |           2.91 |"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "h/llama-tiny-bf16-disk-native-tp2-pause.svg"));
  EXPECT_TRUE(fs::exists(dir / "h/llama-tiny-bf16-disk-native-tp2-pause.gp"));
}

TEST(CliReportHistory, BadInputWritesNothing) {
  test::TempDir dir;
  std::ostringstream out, err;
  EXPECT_EQ(error_of([&] { report_history({kNights + "night-1.json"}, dir / "h", "pause,stall", "10%", "gnuplot", out, err); }),
            "--metric: 'stall' is not one of pause, envelope, prepare, commit");
  EXPECT_EQ(error_of([&] { report_history({kNights + "night-1.json"}, dir / "h", "pause", "ten", "gnuplot", out, err); }),
            "--max-regression: 'ten' is not a non-negative percentage (\"10%\") or fraction (\"0.1\")");
  EXPECT_EQ(error_of([&] {
              report_history({kNights + "night-1.json", kNights + "night-1.json"}, dir / "h", "pause", "10%", "gnuplot",
                             out, err);
            }),
            kNights + "night-1.json: given twice: each results file may be merged once");
  EXPECT_FALSE(fs::exists(dir / "h"));
}

TEST(CliReportTable, PlotsPerCellAndAMissingGnuplot) {
  test::TempDir dir;
  std::ostringstream out, err;
  const fs::path missing = dir / "bin/gnuplot";
  EXPECT_EQ(report_table({kNights + "night-1.json"}, "text", "", "", out, PlotArgs{dir / "p", missing.string()}, &err),
            0);
  EXPECT_NE(out.str().find("## Summary"), std::string::npos);
  EXPECT_EQ(err.str(), "report table --plots: " + missing.string() +
                           " not found (install the Debian package gnuplot-nox): no plots drawn; the scripts are in " +
                           (dir / "p").string() + " (run gnuplot on each there)\n");
  EXPECT_EQ(slurp(dir / "p/pause.dat"), "1\t0.003\t0.002\t0.004\t0.0011\tNaN\n2\t0.00011\t0.0001\t0.00012\t0.0001\tNaN\n");
  EXPECT_EQ(slurp(dir / "p/loop.dat"), "1\t0.022\t0.02\t0.024\t0.0031\tNaN\n2\t0.011\t0.01\t0.012\t0.00031\tNaN\n");
  if (find_program("gnuplot")) {
    err.str("");
    EXPECT_EQ(report_table({kNights + "night-1.json"}, "text", "", "", out, PlotArgs{dir / "q", "gnuplot"}, &err), 0);
    EXPECT_EQ(err.str(), "plot: " + (dir / "q/pause.svg").string() + "\nplot: " + (dir / "q/loop.svg").string() + "\n");
    const std::string svg = slurp(dir / "q/loop.svg");
    EXPECT_NE(svg.find("<text>complete loop (envelope) mean, min-max over trials</text>"), std::string::npos);
    EXPECT_NE(svg.find("<text>llama-tiny-bf16/disk/native/tp2</text>"), std::string::npos);
  }
}

}  // namespace
}  // namespace wsb
