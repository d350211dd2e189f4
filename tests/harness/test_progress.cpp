// Live progress: the child's progress file and the parent's status lines (TTY, plain, JSON, quiet).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/progress.hpp"
#include "harness/progress_display.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

TEST(ProgressFile, RoundTripsAndIgnoresGarbage) {
  test::TempDir dir;
  const auto out = dir / "000.json";
  const auto path = progress_path_for(out);
  EXPECT_EQ(path, dir / "000.json.progress");
  EXPECT_EQ(read_progress(path), std::nullopt);  // absent
  ProgressFile file(path);
  file.report(-1, 3, "publish");
  EXPECT_EQ(read_progress(path), (CellProgress{-1, 3, "publish"}));
  file.report(1, 3, "commit");
  EXPECT_EQ(read_progress(path), (CellProgress{1, 3, "commit"}));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::ofstream(path) << R"({"trial": 1, "tri)";
  EXPECT_EQ(read_progress(path), std::nullopt);  // half a file
  std::ofstream(path) << R"({"trial": "1", "trials": 3, "phase": "x"})";
  EXPECT_EQ(read_progress(path), std::nullopt);
  ProgressFile().report(0, 1, "boot");  // no path: a no-op
}

CellStatus status(int trial, const std::string& phase, double elapsed) {
  return CellStatus{2, 10, "llama-tiny-bf16/cpu/gvisor/tp2", {trial, 3, phase}, elapsed, "", ""};
}

TEST(ProgressDisplay, Lines) {
  EXPECT_EQ(progress_line(status(-1, "", 0)), "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  starting  0.0 s");
  EXPECT_EQ(progress_line(status(-1, "publish", 0.24)), "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  publish  0.2 s");
  EXPECT_EQ(progress_line(status(1, "prepare", 3.04)), "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  trial 2/3  prepare  3.0 s");
  CellStatus end = status(2, "done", 9.96);
  end.status = "fail";
  end.reason = "trial 0: probes_exact: error";
  EXPECT_EQ(progress_line(end), "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  fail: trial 0: probes_exact: error  10.0 s");
  end.status = "pass";
  end.reason = "";
  EXPECT_EQ(progress_line(end), "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  pass  10.0 s");
}

/// Feeds one cell's events: start, two polls in publish, one in trial 1 commit, end.
std::string render(ProgressStyle style) {
  std::ostringstream out;
  ProgressDisplay d(style, out);
  d.started(status(-1, "", 0));
  d.update(status(-1, "publish", 0.1));
  d.update(status(-1, "publish", 0.2));
  d.update(status(0, "commit", 1.5));
  CellStatus end = status(2, "done", 4);
  end.status = "pass";
  d.finished(end);
  return out.str();
}

TEST(ProgressDisplay, PlainPrintsOneLinePerPhaseChange) {
  EXPECT_EQ(render(ProgressStyle::Plain),
            "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  starting  0.0 s\n"
            "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  publish  0.1 s\n"
            "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  trial 1/3  commit  1.5 s\n"
            "[2/10] llama-tiny-bf16/cpu/gvisor/tp2  pass  4.0 s\n");
}

TEST(ProgressDisplay, TtyRewritesTheLineInPlace) {
  EXPECT_EQ(render(ProgressStyle::Tty),
            "\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  starting  0.0 s"
            "\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  publish  0.1 s"
            "\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  publish  0.2 s"
            "\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  trial 1/3  commit  1.5 s"
            "\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  pass  4.0 s\n");
}

TEST(ProgressDisplay, TtyCutsTheRunningLineToTheTerminalWidth) {
  std::ostringstream out;
  ProgressDisplay d(ProgressStyle::Tty, out, 21);
  d.update(status(1, "prepare", 3.0));
  CellStatus end = status(2, "done", 4);
  end.status = "pass";
  d.finished(end);  // the final line is kept whole: it stays in the scrollback
  EXPECT_EQ(out.str(), "\r\033[K[2/10] llama-tiny-bf\r\033[K[2/10] llama-tiny-bf16/cpu/gvisor/tp2  pass  4.0 s\n");
}

TEST(ProgressDisplay, JsonIsOneObjectPerEvent) {
  EXPECT_EQ(render(ProgressStyle::Json),
            R"({"cell":2,"cells":10,"elapsed_s":0.0,"event":"cell_start","id":"llama-tiny-bf16/cpu/gvisor/tp2"})" "\n"
            R"({"cell":2,"cells":10,"elapsed_s":0.1,"event":"phase","id":"llama-tiny-bf16/cpu/gvisor/tp2","phase":"publish","trial":0,"trials":3})" "\n"
            R"({"cell":2,"cells":10,"elapsed_s":1.5,"event":"phase","id":"llama-tiny-bf16/cpu/gvisor/tp2","phase":"commit","trial":1,"trials":3})" "\n"
            R"({"cell":2,"cells":10,"elapsed_s":4.0,"event":"cell_end","id":"llama-tiny-bf16/cpu/gvisor/tp2","reason":"","status":"pass"})" "\n");
}

TEST(ProgressDisplay, QuietPrintsNothing) { EXPECT_EQ(render(ProgressStyle::Quiet), ""); }

TEST(ProgressDisplay, StyleChoice) {
  EXPECT_EQ(choose_progress_style(true, true, true), ProgressStyle::Quiet);
  EXPECT_EQ(choose_progress_style(false, true, true), ProgressStyle::Json);
  EXPECT_EQ(choose_progress_style(false, false, true), ProgressStyle::Tty);
  EXPECT_EQ(choose_progress_style(false, false, false), ProgressStyle::Plain);
}

}  // namespace
}  // namespace wsb
