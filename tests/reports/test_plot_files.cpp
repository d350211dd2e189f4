// Plots written into a folder: the data and script always; the SVG when gnuplot is installed (skipped otherwise);
// a missing gnuplot reported, never thrown.
#include "reports/plot_files.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "reports/gnuplot.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

PlotJob job() {
  Plot p;
  p.title = "m/disk/native/tp2: pause";
  p.value_title = "pause mean, 95% CI over hosts";
  p.marked_title = "regression > 10% vs previous";
  p.points = {PlotPoint{"2026-12-01\n1111111", 0.003, std::nullopt, std::nullopt, 0.0011, false},
              PlotPoint{"2026-12-02\n2222222", 0.004, std::nullopt, std::nullopt, 0.0011, true}};
  return PlotJob{"m-disk-native-tp2-pause", p};
}

TEST(ReportsPlotFiles, MissingGnuplotWritesScriptsAndSaysSo) {
  test::TempDir dir;
  const PlotOutcome out = write_plots(dir / "plots", {job()}, (dir / "no-such-gnuplot").string());
  EXPECT_FALSE(out.gnuplot_found);
  EXPECT_TRUE(out.drawn.empty());
  ASSERT_EQ(out.problems.size(), 1u);
  EXPECT_EQ(out.problems[0], (dir / "no-such-gnuplot").string() +
                                 " not found (install the Debian package gnuplot-nox): no plots drawn; the scripts "
                                 "are in " +
                                 (dir / "plots").string() + " (run gnuplot on each there)");
  EXPECT_EQ(read(dir / "plots/m-disk-native-tp2-pause.dat"), plot_data(job().plot));
  EXPECT_EQ(read(dir / "plots/m-disk-native-tp2-pause.gp"),
            plot_script(job().plot, "m-disk-native-tp2-pause.dat", "m-disk-native-tp2-pause.svg"));
  EXPECT_FALSE(fs::exists(dir / "plots/m-disk-native-tp2-pause.svg"));
}

TEST(ReportsPlotFiles, FindProgram) {
  test::TempDir dir;
  EXPECT_FALSE(find_program("").has_value());
  EXPECT_FALSE(find_program((dir / "absent").string()).has_value());
  EXPECT_EQ(find_program("/bin/sh"), fs::path("/bin/sh"));
  EXPECT_TRUE(find_program("sh").has_value());
}

TEST(ReportsPlotFiles, FailingGnuplotIsReported) {
  test::TempDir dir;
  // A stand-in that fails the way gnuplot does on a bad script: a message on stderr, exit status 1.
  const fs::path fake = dir / "fake-gnuplot";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\necho \"line 1: unknown command\" >&2\nexit 1\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  const PlotOutcome out = write_plots(dir / "plots", {job()}, fake.string());
  EXPECT_TRUE(out.gnuplot_found);
  EXPECT_TRUE(out.drawn.empty());
  ASSERT_EQ(out.problems.size(), 1u);
  EXPECT_EQ(out.problems[0], (dir / "plots/m-disk-native-tp2-pause.gp").string() + ": " + fake.string() +
                                 " failed: exit status 1: line 1: unknown command");
}

TEST(ReportsPlotFiles, GnuplotDrawsTheSvg) {
  if (!find_program("gnuplot")) GTEST_SKIP() << "gnuplot is not installed (Debian package gnuplot-nox)";
  test::TempDir dir;
  const PlotOutcome out = write_plots(dir.path(), {job()}, "gnuplot");
  EXPECT_TRUE(out.problems.empty()) << out.problems.front();
  ASSERT_EQ(out.drawn, std::vector<std::string>{"m-disk-native-tp2-pause"});
  const std::string svg = read(dir / "m-disk-native-tp2-pause.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<text>m/disk/native/tp2: pause</text>"), std::string::npos);
  EXPECT_NE(svg.find("<text>pause mean, 95% CI over hosts</text>"), std::string::npos);
  EXPECT_NE(svg.find("<text>floor</text>"), std::string::npos);
  EXPECT_NE(svg.find("<text>regression > 10% vs previous</text>"), std::string::npos);
  EXPECT_NE(svg.find("<text>2026-12-02</text>"), std::string::npos);
}

}  // namespace
}  // namespace wsb
