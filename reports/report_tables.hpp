#pragma once
// Every table of a results file, by name, in one of the output formats of `wsbench report table`.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

struct NamedTable {
  std::string title;  ///< "Summary", "Fleet means", "Checks", "Memory", "Phases <cell id> on <host>"
  Table table;
};

/// In order: Summary (summary_table); Fleet means (host_mean_table, only when cells come from more than one host);
/// Checks (checks_table); Memory (memory_table); Publications (only with checkpoint cells); Refit (refit_table, only
/// when some trial recorded refit_streams); one "Phases <id> on <host>" per cell that recorded phases.
std::vector<NamedTable> report_tables(const Results& results);

enum class TableFormat { Text, Markdown, Json, Csv };

/// "text" | "markdown" | "json" | "csv"; nullopt otherwise.
std::optional<TableFormat> parse_table_format(std::string_view name);

/// Text: render_terminal_summary with phases, then "## Checks" and "## Memory" as aligned text. Markdown:
/// render_report_markdown (the report.md document). Json: {"tables": [{"title", "columns", "rows"}]} (table_json,
/// dumped with 2-space indent). Csv: per table a "# <title>" line, render_csv, and a blank line between tables.
std::string render_tables(const Results& results, TableFormat format);

}  // namespace wsb
