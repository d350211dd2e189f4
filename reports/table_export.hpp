#pragma once
// Machine-readable forms of a report table: CSV and JSON (the same rows as render_markdown, numbers unformatted).
#include <string>

#include <nlohmann/json.hpp>

#include "reports/table.hpp"

namespace wsb {

/// RFC 4180 CSV: a header line, then one line per row. Numbers are exact (format_raw); a unit joins its header as
/// "min (s)"; a DurationRange column becomes two columns "<header> min (s)" and "<header> max (s)", a
/// DurationMeanCI column "<header> mean (s)" and "<header> half-width (s)"; missing values are empty fields.
/// Fields holding a comma, quote or newline are quoted, quotes doubled. Lines end with "\n".
std::string render_csv(const Table& table);

/// {"columns": [{"header", "kind", "unit"}], "rows": [[...]]}: text as strings, numbers as numbers, a range as
/// {"min", "max"}, a mean as {"mean", "half_width"} (null without an interval), a missing value as null.
nlohmann::json table_json(const Table& table);

}  // namespace wsb
