#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "reports/report_tables.hpp"
#include "harness/runner.hpp"
#include "harness/shard.hpp"
#include "reports/merge.hpp"
#include "reports/report_markdown.hpp"
#include "reports/results_io.hpp"
#include "reports/results_json.hpp"
#include "reports/terminal.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

bool any_failed(const Results& results) {
  for (const auto& cell : results.cells) {
    if (cell.status == Status::Fail) return true;
  }
  return false;
}

}  // namespace

int cmd_run(const fs::path& profiles_dir, const RunArgs& args) {
  const fs::path& out = args.out;
  RunOptions options;
  options.matrix_path = args.matrix;
  options.out_dir = out;
  options.profiles_dir = profiles_dir;
  options.filter = args.filter;
  options.keep_workdir = args.keep_workdir;
  if (!args.shard.empty()) options.shard = parse_shard(args.shard);
  options.progress = choose_progress_style(args.quiet, args.json_progress, ::isatty(STDERR_FILENO) == 1);
  const Results results = run_matrix(options, self_executable());
  save_results(out / "results.json", results);
  write_report_markdown(out / "report.md", results);
  std::cout << render_tables(results, TableFormat::Text);  // the tables of report.md: summary, phases, checks, memory
  std::cout << fmt::format("\nresults: {}\nreport:  {}\n", (out / "results.json").string(), (out / "report.md").string());
  return any_failed(results) ? 1 : 0;
}

}  // namespace wsb
