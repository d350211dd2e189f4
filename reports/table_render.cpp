#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/table.hpp"

namespace wsb {
namespace {

bool right_aligned(MetricKind kind) { return kind != MetricKind::Text; }

std::string one_line(const std::string& s, bool escape_pipes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '|' && escape_pipes) {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

std::string pad(const std::string& s, size_t width, bool right) {
  const size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

// All text of the table: header line, optional units line, then rows.
struct Grid {
  std::vector<std::string> header;
  std::vector<std::string> units;  // empty when no column has a unit
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> widths;
};

Grid layout(const Table& t, bool markdown) {
  Grid g;
  bool any_unit = false;
  for (const Column& c : t.columns) {
    g.header.push_back(one_line(c.header, markdown));
    const std::string_view u = metric_unit(c.kind);
    any_unit = any_unit || !u.empty();
    g.units.push_back(u.empty() ? "" : fmt::format("({})", u));
  }
  if (!any_unit) g.units.clear();
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r].size() != t.columns.size()) {
      throw std::logic_error(fmt::format("table row {} has {} values for {} columns", r, t.rows[r].size(),
                                         t.columns.size()));
    }
    std::vector<std::string> line;
    for (size_t c = 0; c < t.columns.size(); ++c) {
      line.push_back(one_line(format_value(t.columns[c], t.rows[r][c]), markdown));
    }
    g.rows.push_back(std::move(line));
  }
  g.widths.assign(t.columns.size(), markdown ? 3 : 0);  // markdown needs at least "---"
  auto widen = [&](const std::vector<std::string>& line) {
    for (size_t c = 0; c < line.size(); ++c) g.widths[c] = std::max(g.widths[c], display_width(line[c]));
  };
  widen(g.header);
  widen(g.units);
  for (const auto& line : g.rows) widen(line);
  return g;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string render_markdown(const Table& table) {
  const Grid g = layout(table, true);
  // Built by appends only: g++ 12 at -O3 raises a false -Wrestrict on `" " + std::string` chains.
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < cells.size(); ++c) {
      out += ' ';
      out += pad(cells[c], g.widths[c], right_aligned(table.columns[c].kind));
      out += " |";
    }
    out += '\n';
    return out;
  };
  std::string out = line(g.header);
  out += '|';
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const bool right = right_aligned(table.columns[c].kind);
    out += ' ';
    out.append(right ? g.widths[c] - 1 : g.widths[c], '-');
    out += right ? ": |" : " |";
  }
  out += '\n';
  if (!g.units.empty()) out += line(g.units);
  for (const auto& row : g.rows) out += line(row);
  return out;
}

std::string render_text(const Table& table) {
  const Grid g = layout(table, false);
  auto line = [&](const std::string& prefix, const std::vector<std::string>& cells) {
    std::string out = prefix;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      out += pad(cells[c], g.widths[c], right_aligned(table.columns[c].kind));
    }
    return rstrip(out) + "\n";
  };
  std::string out = line("# ", g.header);
  if (!g.units.empty()) out += line("# ", g.units);
  for (const auto& row : g.rows) out += line("  ", row);
  return out;
}

}  // namespace wsb
