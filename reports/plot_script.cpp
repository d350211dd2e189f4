#include "reports/plot_script.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "reports/format.hpp"

namespace wsb {
namespace {

std::string number(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "NaN";
  return format_raw(*v);
}

// A gnuplot double-quoted string: backslash escapes are interpreted there, so "\n" in a label stays a line break
// and only the quote and a literal backslash need escaping.
std::string quoted(const std::string& text, bool keep_newlines) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += keep_newlines ? "\\n" : " ";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string plot_data(const Plot& plot) {
  std::string out;
  for (size_t i = 0; i < plot.points.size(); ++i) {
    const PlotPoint& p = plot.points[i];
    const std::optional<double> low = p.low ? p.low : p.value;
    const std::optional<double> high = p.high ? p.high : p.value;
    out += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", i + 1, number(p.value), number(low), number(high), number(p.floor),
                       p.marked ? number(p.value) : "NaN");
  }
  return out;
}

std::string plot_script(const Plot& plot, const std::string& data_file, const std::string& svg_file) {
  const bool any_floor = std::any_of(plot.points.begin(), plot.points.end(), [](const PlotPoint& p) {
    return p.floor && std::isfinite(*p.floor);
  });
  const bool any_marked =
      std::any_of(plot.points.begin(), plot.points.end(), [](const PlotPoint& p) { return p.marked && p.value; });
  std::string s;
  s += "# wsbench plot: reads " + data_file + ", writes " + svg_file + "; run gnuplot on it in this folder\n";
  // Cell ids are long: their tics are slanted, which takes a taller picture and bottom margin.
  s += fmt::format("set terminal svg size 900,{} dynamic noenhanced font \"sans,11\" background \"white\"\n",
                   plot.series ? 450 : 600);
  s += "set output " + quoted(svg_file, false) + "\n";
  s += "set datafile separator \"\\t\"\n";
  s += "set datafile missing \"NaN\"\n";
  s += "set title " + quoted(plot.title, false) + "\n";
  s += "set ylabel " + quoted(plot.ylabel, false) + "\n";
  s += plot.log_y ? "set logscale y\n" : "set yrange [0:*]\n";
  s += fmt::format("set xrange [0.5:{}.5]\n", plot.points.size());
  s += plot.series ? "set xtics (" : "set xtics rotate by 30 right (";
  for (size_t i = 0; i < plot.points.size(); ++i) {
    s += fmt::format("{}{} {}", i ? ", " : "", quoted(plot.points[i].label, true), i + 1);
  }
  s += ")\n";
  s += plot.series ? "set bmargin 5\n" : "set bmargin 16\nset lmargin 24\n";
  s += "set grid ytics\n";
  s += "set key outside top center horizontal\n";
  const std::string data = quoted(data_file, false);
  s += "plot " + data + " using 1:2:3:4 with " + (plot.series ? "yerrorlines" : "yerrorbars") +
       " linecolor rgb \"#1f77b4\" pointtype 7 title " + quoted(plot.value_title, false);
  if (any_floor) {
    s += plot.series ? ", \\\n     \"\" using 1:5 with lines dashtype 2 linewidth 2 linecolor rgb \"#2ca02c\" title "
                     : ", \\\n     \"\" using 1:5:(0.3) with xerrorbars pointtype 0 linewidth 2 linecolor rgb \"#2ca02c\" "
                       "title ";
    s += quoted(plot.floor_title, false);
  }
  if (any_marked) {
    s += ", \\\n     \"\" using 1:6 with points pointtype 6 pointsize 2.5 linewidth 2 linecolor rgb \"#d62728\" title " +
         quoted(plot.marked_title, false);
  }
  s += "\n";
  return s;
}

std::string plot_file_stem(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    const char put = keep ? c : '-';
    if (put == '-' && !out.empty() && out.back() == '-') continue;
    out += put;
  }
  return out;
}

}  // namespace wsb
