#pragma once
// A plot of durations as gnuplot input: a tab-separated data file and a script drawing it with gnuplot's svg
// terminal (gnuplot 5, Debian package gnuplot-nox). Pure text, so the exact script is testable; running gnuplot is
// reports/gnuplot.hpp.
#include <optional>
#include <string>
#include <vector>

namespace wsb {

/// One x position: a series point (one night) or one cell.
struct PlotPoint {
  std::string label;            ///< x tic text; "\n" starts a second line
  std::optional<double> value;  ///< seconds; nullopt: nothing drawn at this x
  std::optional<double> low;    ///< error bar ends, seconds; nullopt: the bar collapses onto value
  std::optional<double> high;
  std::optional<double> floor;  ///< the physical floor at this x, seconds
  bool marked = false;          ///< circled (a regression)
};

struct Plot {
  std::string title;
  std::string ylabel = "seconds";
  std::string value_title;                  ///< key text of the values
  std::string floor_title = "floor";        ///< key text of the floor (drawn only when a point has one)
  std::string marked_title;                 ///< key text of the circles (drawn only when a point is marked)
  bool series = true;  ///< true: points joined in x order, the floor a dashed line; false: cells side by side,
                       ///< each value a point with its bar, each floor a short horizontal segment at its cell
  bool log_y = false;  ///< logarithmic y axis (values spanning orders of magnitude); else y starts at 0
  std::vector<PlotPoint> points;
};

/// The data file: one line per point, "x<TAB>value<TAB>low<TAB>high<TAB>floor<TAB>marked" with x = 1, 2, ...,
/// numbers in shortest round-trip form, "NaN" for a missing value (and for `marked` when the point is not marked;
/// low/high default to value).
std::string plot_data(const Plot& plot);

/// The gnuplot script that reads `data_file` and writes `svg_file` (both as given, relative to gnuplot's working
/// folder): svg terminal 900x450 white (900x600 with x tics slanted by 30 degrees for cells), the title, the y
/// label, y from 0 (or logarithmic), x tics from the labels, a bottom margin for them, a y grid, the key on top; then the values (yerrorlines for a series, yerrorbars otherwise), the floor when any point has one, the
/// circles when any point is marked. Text is double-quoted with '\' and '"' escaped. Ends with a newline.
std::string plot_script(const Plot& plot, const std::string& data_file, const std::string& svg_file);

/// `text` with every character outside [A-Za-z0-9._-] replaced by '-', runs of '-' joined: a file name part, e.g.
/// "llama/cpu+device-delta/native/tp2" -> "llama-cpu-device-delta-native-tp2".
std::string plot_file_stem(const std::string& text);

}  // namespace wsb
