// Plot input for gnuplot: the exact data file and script of a series and of cells side by side, file stems.
#include "reports/plot_script.hpp"

#include <gtest/gtest.h>

namespace wsb {
namespace {

Plot series_plot() {
  Plot p;
  p.title = "m/cpu/native/tp2: pause";
  p.value_title = "pause mean, 95% CI over hosts";
  p.marked_title = "regression > 10% vs previous";
  p.points = {PlotPoint{"2026-12-01\n1111111", 0.003, std::nullopt, std::nullopt, 0.0011, false},
              PlotPoint{"2026-12-02\n2222222", 0.0032, 0.0019, 0.0045, 0.0011, false},
              PlotPoint{"2026-12-03\n\"x\\y\"", std::nullopt, std::nullopt, std::nullopt, std::nullopt, false},
              PlotPoint{"2026-12-04\n4444444", 0.004, std::nullopt, std::nullopt, 0.0012, true}};
  return p;
}

TEST(ReportsPlotScript, SeriesData) {
  EXPECT_EQ(plot_data(series_plot()),
            "1\t0.003\t0.003\t0.003\t0.0011\tNaN\n"
            "2\t0.0032\t0.0019\t0.0045\t0.0011\tNaN\n"
            "3\tNaN\tNaN\tNaN\tNaN\tNaN\n"
            "4\t0.004\t0.004\t0.004\t0.0012\t0.004\n");
}

TEST(ReportsPlotScript, SeriesScript) {
  EXPECT_EQ(plot_script(series_plot(), "a.dat", "a.svg"),
            "# wsbench plot: reads a.dat, writes a.svg; run gnuplot on it in this folder\n"
            "set terminal svg size 900,450 dynamic noenhanced font \"sans,11\" background \"white\"\n"
            "set output \"a.svg\"\n"
            "set datafile separator \"\\t\"\n"
            "set datafile missing \"NaN\"\n"
            "set title \"m/cpu/native/tp2: pause\"\n"
            "set ylabel \"seconds\"\n"
            "set yrange [0:*]\n"
            "set xrange [0.5:4.5]\n"
            "set xtics (\"2026-12-01\\n1111111\" 1, \"2026-12-02\\n2222222\" 2, \"2026-12-03\\n\\\"x\\\\y\\\"\" 3, "
            "\"2026-12-04\\n4444444\" 4)\n"
            "set bmargin 5\n"
            "set grid ytics\n"
            "set key outside top center horizontal\n"
            "plot \"a.dat\" using 1:2:3:4 with yerrorlines linecolor rgb \"#1f77b4\" pointtype 7 title \"pause mean, "
            "95% CI over hosts\", \\\n"
            "     \"\" using 1:5 with lines dashtype 2 linewidth 2 linecolor rgb \"#2ca02c\" title \"floor\", \\\n"
            "     \"\" using 1:6 with points pointtype 6 pointsize 2.5 linewidth 2 linecolor rgb \"#d62728\" title "
            "\"regression > 10% vs previous\"\n");
}

TEST(ReportsPlotScript, CellsScriptWithoutFloorOrMarks) {
  Plot p;
  p.title = "pause per cell";
  p.value_title = "pause mean, min-max over trials";
  p.series = false;
  p.log_y = true;
  p.points = {PlotPoint{"a/disk/native/tp1", 0.5, 0.4, 0.6, std::nullopt, false},
              PlotPoint{"b/cpu/native/tp1", 0.001, 0.001, 0.001, std::nullopt, false}};
  EXPECT_EQ(plot_script(p, "pause.dat", "pause.svg"),
            "# wsbench plot: reads pause.dat, writes pause.svg; run gnuplot on it in this folder\n"
            "set terminal svg size 900,600 dynamic noenhanced font \"sans,11\" background \"white\"\n"
            "set output \"pause.svg\"\n"
            "set datafile separator \"\\t\"\n"
            "set datafile missing \"NaN\"\n"
            "set title \"pause per cell\"\n"
            "set ylabel \"seconds\"\n"
            "set logscale y\n"
            "set xrange [0.5:2.5]\n"
            "set xtics rotate by 30 right (\"a/disk/native/tp1\" 1, \"b/cpu/native/tp1\" 2)\n"
            "set bmargin 16\n"
            "set lmargin 24\n"
            "set grid ytics\n"
            "set key outside top center horizontal\n"
            "plot \"pause.dat\" using 1:2:3:4 with yerrorbars linecolor rgb \"#1f77b4\" pointtype 7 title \"pause mean, "
            "min-max over trials\"\n");
  p.points[1].floor = 0.0005;
  EXPECT_NE(plot_script(p, "pause.dat", "pause.svg")
                .find("\"\" using 1:5:(0.3) with xerrorbars pointtype 0 linewidth 2 linecolor rgb \"#2ca02c\" title "
                      "\"floor\"\n"),
            std::string::npos);
}

TEST(ReportsPlotScript, FileStems) {
  EXPECT_EQ(plot_file_stem("llama/cpu+device-delta/native/tp2"), "llama-cpu-device-delta-native-tp2");
  EXPECT_EQ(plot_file_stem("m/disk@sglang:in_place/gvisor/tp1-pause"), "m-disk-sglang-in_place-gvisor-tp1-pause");
  EXPECT_EQ(plot_file_stem("a b..c"), "a-b..c");
}

}  // namespace
}  // namespace wsb
