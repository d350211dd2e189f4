#pragma once
// Live progress of `wsbench run`: one status line per cell ("[k/N] id  trial t/n  phase  elapsed"), rewritten in
// place on a TTY, plain lines (one per phase change) otherwise, one JSON object per event with --json-progress,
// nothing with --quiet.
#include <cstddef>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/progress.hpp"

namespace wsb {

enum class ProgressStyle { Quiet, Plain, Tty, Json };

/// --quiet wins, then --json-progress, then a TTY on the stream gets Tty, anything else Plain.
ProgressStyle choose_progress_style(bool quiet, bool json, bool is_tty);

/// One cell's state as shown: `cell` is 1-based of `cells`.
struct CellStatus {
  size_t cell = 0;
  size_t cells = 0;
  std::string id;
  CellProgress progress;  ///< trial -1 and empty phase before the child reported anything
  double elapsed_s = 0;   ///< since the cell started
  std::string status;     ///< set when the cell ended: pass | fail | skipped
  std::string reason;
};

/// "[k/N] ID  trial t/n  PHASE  E.E s" while running (trial 1-based; "starting" before any report), and
/// "[k/N] ID  STATUS[: REASON]  E.E s" once ended.
std::string progress_line(const CellStatus& s);

/// {"event", "cell", "cells", "id", "elapsed_s"} plus "trial" (1-based, or 0 during setup), "trials", "phase" for
/// "phase" events and "status", "reason" for "cell_end".
nlohmann::json progress_event(const std::string& event, const CellStatus& s);

/// Columns of the terminal on file descriptor `fd`, 0 when it is not a terminal or does not say.
size_t terminal_width(int fd);

/// Renders the events of a run to `out` in one style.
class ProgressDisplay {
 public:
  /// `width` > 0 cuts the in-place TTY line to that many characters (a wrapped line cannot be rewritten in place).
  ProgressDisplay(ProgressStyle style, std::ostream& out, size_t width = 0) : style_(style), out_(out), width_(width) {}
  /// A cell is about to start.
  void started(const CellStatus& s);
  /// Called on every poll while the child runs; prints only what changed (TTY: the line; else: trial/phase).
  void update(const CellStatus& s);
  /// The cell ended (s.status set).
  void finished(const CellStatus& s);

 private:
  ProgressStyle style_;
  std::ostream& out_;
  size_t width_;
  CellProgress last_;
  std::string last_line_;
};

}  // namespace wsb
