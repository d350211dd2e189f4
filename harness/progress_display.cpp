#include "harness/progress_display.hpp"

#include <sys/ioctl.h>

#include <fmt/format.h>

namespace wsb {

ProgressStyle choose_progress_style(bool quiet, bool json, bool is_tty) {
  if (quiet) return ProgressStyle::Quiet;
  if (json) return ProgressStyle::Json;
  return is_tty ? ProgressStyle::Tty : ProgressStyle::Plain;
}

std::string progress_line(const CellStatus& s) {
  std::string line = fmt::format("[{}/{}] {}  ", s.cell, s.cells, s.id);
  if (!s.status.empty()) {
    line += s.reason.empty() ? s.status : s.status + ": " + s.reason;
  } else if (s.progress.phase.empty()) {
    line += "starting";
  } else if (s.progress.trial < 0) {
    line += s.progress.phase;
  } else {
    line += fmt::format("trial {}/{}  {}", s.progress.trial + 1, s.progress.trials, s.progress.phase);
  }
  return line + fmt::format("  {:.1f} s", s.elapsed_s);
}

nlohmann::json progress_event(const std::string& event, const CellStatus& s) {
  nlohmann::json j{{"event", event}, {"cell", s.cell}, {"cells", s.cells}, {"id", s.id}};
  if (event == "phase") {
    j["trial"] = s.progress.trial + 1;
    j["trials"] = s.progress.trials;
    j["phase"] = s.progress.phase;
  }
  if (event == "cell_end") {
    j["status"] = s.status;
    j["reason"] = s.reason;
  }
  j["elapsed_s"] = s.elapsed_s;
  return j;
}

size_t terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0) return 0;
  return ws.ws_col;
}

void ProgressDisplay::started(const CellStatus& s) {
  last_ = CellProgress{};
  last_line_.clear();
  switch (style_) {
    case ProgressStyle::Quiet: return;
    case ProgressStyle::Json: out_ << progress_event("cell_start", s).dump() << "\n"; break;
    case ProgressStyle::Plain: out_ << progress_line(s) << "\n"; break;
    case ProgressStyle::Tty: update(s); return;
  }
  out_.flush();
}

void ProgressDisplay::update(const CellStatus& s) {
  if (style_ == ProgressStyle::Quiet) return;
  if (style_ == ProgressStyle::Tty) {
    std::string line = progress_line(s);
    if (width_ > 1 && line.size() >= width_) line = line.substr(0, width_ - 1);
    if (line == last_line_) return;
    last_line_ = line;
    out_ << "\r\033[K" << line << std::flush;  // carriage return + erase line: rewrite in place
    return;
  }
  if (s.progress == last_ || s.progress.phase.empty()) return;
  last_ = s.progress;
  if (style_ == ProgressStyle::Json) {
    out_ << progress_event("phase", s).dump() << "\n";
  } else {
    out_ << progress_line(s) << "\n";
  }
  out_.flush();
}

void ProgressDisplay::finished(const CellStatus& s) {
  switch (style_) {
    case ProgressStyle::Quiet: return;
    case ProgressStyle::Json: out_ << progress_event("cell_end", s).dump() << "\n"; break;
    case ProgressStyle::Plain: out_ << progress_line(s) << "\n"; break;
    case ProgressStyle::Tty: out_ << "\r\033[K" << progress_line(s) << "\n"; break;
  }
  out_.flush();
}

}  // namespace wsb
