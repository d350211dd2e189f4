#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "harness/soak.hpp"
#include "core/errors.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

/// "2%" -> 0.02, "0.02" -> 0.02. Throws Error(Format) naming --max-deviation.
double parse_max_deviation(const std::string& text) {
  std::string s = text;
  const bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !(v >= 0) || !std::isfinite(v) || (!percent && v > 1)) {
    throw Error(ErrorKind::Format,
                fmt::format("--max-deviation '{}' is not a percentage (\"2%\") or a fraction <= 1 (\"0.02\")", text));
  }
  return percent ? v / 100 : v;
}

}  // namespace

int cmd_soak(const fs::path& profiles_dir, const SoakArgs& args) {
  SoakOptions options;
  options.profile = find_profile(args.model, profiles_dir);
  options.tp = args.tp;
  options.cycles = args.cycles;
  options.warmup = args.warmup;
  options.max_deviation = parse_max_deviation(args.max_deviation);
  options.seed = args.seed;
  options.prepare_threads = args.prepare_threads;
  const auto encoding = parse_delta_encoding(args.encoding);
  if (!encoding) throw Error(ErrorKind::Format, fmt::format("--encoding '{}' is unknown (xor, overwrite)", args.encoding));
  options.encoding = *encoding;
  const bool own_workdir = args.workdir.empty();
  options.workdir = own_workdir ? fs::temp_directory_path() / fmt::format("wsbench-soak-{}", ::getpid()) : args.workdir;
  // One line per 10 cycles on stderr: a 100-cycle soak of a tiny preset takes seconds, a scaled one minutes.
  options.on_cycle = [](int done, int total) {
    if (done % 10 == 0 || done == total) std::cerr << fmt::format("soak: {}/{} cycles\n", done, total);
  };
  SoakResult result;
  try {
    result = run_soak(options);
  } catch (...) {
    std::error_code ec;
    if (own_workdir && !args.keep_workdir) fs::remove_all(options.workdir, ec);
    throw;
  }
  std::error_code ec;
  if (own_workdir && !args.keep_workdir) fs::remove_all(options.workdir, ec);

  std::cout << fmt::format(
      "wsbench soak: {} at TP {}, {} update cycles (disk and cpu alternating; each mode alternates real and "
      "identity deltas), memory sampled every 5 ms during prepare and commit; flat means within {:.2f}% of the "
      "window's start after {} warm-up cycles, comparing readings one period (4 cycles) apart\n",
      result.model, result.tp, result.cycles, 100 * result.max_deviation, result.warmup);
  std::string first_failure = result.reference_failure;
  for (const auto& c : result.cycles_run) {
    if (!c.failure.empty()) {
      first_failure = fmt::format("cycle {} ({} {}): {}", c.index, c.mode, c.identity ? "identity" : "real", c.failure);
      break;
    }
  }
  std::cout << fmt::format("exact: {}/{} updates (identity: bytes and fingerprint unchanged; real: both changed; cpu "
                           "engine == disk engine after every pair; both == a native load at the end){}\n\n",
                           result.exact_updates(), result.cycles, first_failure.empty() ? "" : "; FAIL: " + first_failure);
  std::cout << render_text(soak_timing_table(result)) << "\n";
  if (!result.figures.empty()) std::cout << render_text(soak_table(result)) << "\n";
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    out << soak_json(result).dump(2) << "\n";
    if (!out) throw Error(ErrorKind::Io, fmt::format("--json: cannot write {}", args.json.string()));
  }
  std::string not_flat;
  for (const auto& f : result.figures) {
    if (f.judged && f.max_deviation > result.max_deviation) {
      not_flat += fmt::format("{}{} moved {:.2f}%", not_flat.empty() ? "" : ", ", f.resource, 100 * f.max_deviation);
    }
  }
  const bool passed = result.passed();
  std::cout << (passed ? "soak: PASS\n"
                       : fmt::format("soak: FAIL{}{}\n", not_flat.empty() ? "" : ": " + not_flat,
                                     first_failure.empty() ? "" : (not_flat.empty() ? ": " : "; ") + first_failure));
  return passed ? 0 : 1;
}

}  // namespace wsb
