#include "reports/report_tables.hpp"

#include <set>

#include "reports/checks_table.hpp"
#include "reports/host_table.hpp"
#include "reports/memory_table.hpp"
#include "reports/phase_table.hpp"
#include "reports/publication_table.hpp"
#include "reports/report_markdown.hpp"
#include "reports/summary_table.hpp"
#include "reports/table_export.hpp"
#include "reports/terminal.hpp"

namespace wsb {

std::vector<NamedTable> report_tables(const Results& r) {
  std::vector<NamedTable> out;
  out.push_back({"Summary", summary_table(r.cells)});
  std::set<std::string> hosts;
  for (const Cell& c : r.cells) hosts.insert(c.host);
  if (hosts.size() > 1) out.push_back({"Fleet means", host_mean_table(r.cells)});
  out.push_back({"Checks", checks_table(r.cells)});
  out.push_back({"Memory", memory_table(r.cells)});
  if (any_checkpoint_cell(r.cells)) out.push_back({"Publications", publication_table(r.cells)});
  for (const Cell& c : r.cells) {
    Table t = phase_table(c);
    if (!t.rows.empty()) out.push_back({"Phases " + c.id + " on " + c.host, std::move(t)});
  }
  return out;
}

std::optional<TableFormat> parse_table_format(std::string_view name) {
  if (name == "text") return TableFormat::Text;
  if (name == "markdown") return TableFormat::Markdown;
  if (name == "json") return TableFormat::Json;
  if (name == "csv") return TableFormat::Csv;
  return std::nullopt;
}

std::string render_tables(const Results& r, TableFormat format) {
  switch (format) {
    case TableFormat::Markdown: return render_report_markdown(r);
    case TableFormat::Text: {
      std::string out = render_terminal_summary(r, true);
      out += "\n## Checks\n" + render_text(checks_table(r.cells));
      out += "\n## Memory\n" + render_text(memory_table(r.cells));
      if (any_checkpoint_cell(r.cells)) out += "\n## Publications\n" + render_text(publication_table(r.cells));
      return out;
    }
    case TableFormat::Json: {
      nlohmann::json tables = nlohmann::json::array();
      for (const NamedTable& t : report_tables(r)) {
        nlohmann::json j = table_json(t.table);
        j["title"] = t.title;
        tables.push_back(std::move(j));
      }
      return nlohmann::json{{"tables", tables}}.dump(2) + "\n";
    }
    case TableFormat::Csv: {
      std::string out;
      for (const NamedTable& t : report_tables(r)) {
        if (!out.empty()) out += "\n";
        out += "# " + t.title + "\n" + render_csv(t.table);
      }
      return out;
    }
  }
  return "";
}

}  // namespace wsb
