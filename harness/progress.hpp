#pragma once
// The child-to-parent progress channel of a running cell: the child (`wsbench cell`, possibly inside a gVisor
// sandbox) rewrites one small JSON file next to its result, "<cell result>.progress", atomically (write + rename);
// the parent polls it. A file on the shared output folder works under every launcher (no pipe crosses a sandbox).
#include <filesystem>
#include <optional>
#include <string>

namespace wsb {

/// Where a cell is: trial -1 while the cell sets up (publish, reference, floors), else 0-based trial of `trials`.
struct CellProgress {
  int trial = -1;
  int trials = 0;
  std::string phase;  ///< publish | reference | floors | reference engine | boot | prepare | commit | verify | done
  bool operator==(const CellProgress&) const = default;
};

/// The progress file of the cell whose result goes to `cell_out`: "<cell_out>.progress".
std::filesystem::path progress_path_for(const std::filesystem::path& cell_out);

/// Writer side. An empty path makes every report a no-op; write errors are ignored (progress is best effort).
class ProgressFile {
 public:
  explicit ProgressFile(std::filesystem::path path = {}) : path_(std::move(path)) {}
  /// Replaces the file's content with {"trial", "trials", "phase"} (tmp + rename, so a reader sees old or new).
  void report(int trial, int trials, const std::string& phase) const;

 private:
  std::filesystem::path path_;
};

/// Reader side: the last reported progress, or nullopt when the file is absent or not a progress object.
std::optional<CellProgress> read_progress(const std::filesystem::path& path);

}  // namespace wsb
