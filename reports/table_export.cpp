#include "reports/table_export.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace wsb {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string with_unit(const std::string& header, std::string_view unit) {
  return unit.empty() ? header : fmt::format("{} ({})", header, unit);
}

const char* kind_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::Text: return "text";
    case MetricKind::Count: return "count";
    case MetricKind::Duration: return "duration";
    case MetricKind::DurationRange: return "duration_range";
    case MetricKind::DurationMeanCI: return "duration_mean_ci";
    case MetricKind::Bytes: return "bytes";
    case MetricKind::Bandwidth: return "bandwidth";
    case MetricKind::Ratio: return "ratio";
    case MetricKind::Raw: return "raw";
    case MetricKind::Percent: return "percent";
  }
  return "text";
}

void check_width(const Table& t, size_t r) {
  if (t.rows[r].size() != t.columns.size()) {
    throw std::logic_error(fmt::format("table row {} has {} values for {} columns", r, t.rows[r].size(), t.columns.size()));
  }
}

}  // namespace

std::string render_csv(const Table& table) {
  std::vector<std::string> header;
  for (const Column& c : table.columns) {
    if (c.kind == MetricKind::DurationRange) {
      header.push_back(c.header + " min (s)");
      header.push_back(c.header + " max (s)");
    } else if (c.kind == MetricKind::DurationMeanCI) {
      header.push_back(c.header + " mean (s)");
      header.push_back(c.header + " half-width (s)");
    } else {
      header.push_back(with_unit(c.header, metric_unit(c.kind)));
    }
  }
  auto line = [](const std::vector<std::string>& fields) {
    std::string out;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_field(fields[i]);
    }
    return out + "\n";
  };
  std::string out = line(header);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    check_width(table, r);
    std::vector<std::string> fields;
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const Value& v = table.rows[r][c];
      const MetricKind kind = table.columns[c].kind;
      const bool missing = v.type() == Value::Type::Missing;
      if (kind == MetricKind::DurationRange) {
        fields.push_back(missing ? "" : format_raw(v.range().min));
        fields.push_back(missing ? "" : format_raw(v.range().max));
      } else if (kind == MetricKind::DurationMeanCI) {
        fields.push_back(missing ? "" : format_raw(v.mean_ci().mean));
        fields.push_back(missing || !v.mean_ci().half_width ? "" : format_raw(*v.mean_ci().half_width));
      } else if (missing) {
        fields.emplace_back();
      } else if (v.type() == Value::Type::Text) {
        fields.push_back(v.text());
      } else {
        fields.push_back(format_raw(v.number()));
      }
    }
    out += line(fields);
  }
  return out;
}

nlohmann::json table_json(const Table& table) {
  nlohmann::json columns = nlohmann::json::array();
  for (const Column& c : table.columns) {
    columns.push_back({{"header", c.header}, {"kind", kind_name(c.kind)}, {"unit", std::string(metric_unit(c.kind))}});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t r = 0; r < table.rows.size(); ++r) {
    check_width(table, r);
    nlohmann::json row = nlohmann::json::array();
    for (const Value& v : table.rows[r]) {
      switch (v.type()) {
        case Value::Type::Missing: row.push_back(nullptr); break;
        case Value::Type::Text: row.push_back(v.text()); break;
        case Value::Type::Number: row.push_back(v.number()); break;
        case Value::Type::Range: row.push_back({{"min", v.range().min}, {"max", v.range().max}}); break;
        case Value::Type::MeanCI: {
          nlohmann::json m{{"mean", v.mean_ci().mean}, {"half_width", nullptr}};
          if (v.mean_ci().half_width) m["half_width"] = *v.mean_ci().half_width;
          row.push_back(m);
          break;
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return {{"columns", columns}, {"rows", rows}};
}

}  // namespace wsb
