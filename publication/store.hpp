#pragma once
// A publication store: DIR/latest (text: a 6-digit version, advanced atomically, forward only) and
// DIR/updates/weight_vNNNNNN/ (one publication each).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace wsb {

/// Six-digit zero-padded form, e.g. 3 -> "000003".
std::string version_string(uint32_t version);
/// Parses exactly six ASCII digits. Throws Error(Format) naming `what`.
uint32_t parse_version_string(std::string_view text, const std::string& what);

/// fsync(2) of a directory, so renames and creations inside it are durable. Throws Error(Io) naming it.
void fsync_directory(const std::filesystem::path& dir);
/// fsync(2) of a regular file. Throws Error(Io) naming it.
void fsync_file(const std::filesystem::path& file);

class Store {
 public:
  explicit Store(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }
  /// root/updates/weight_vNNNNNN
  std::filesystem::path update_dir(uint32_t version) const;
  /// True when the publication's index file exists.
  bool has(uint32_t version) const;
  /// Versions with an index file, ascending.
  std::vector<uint32_t> versions() const;
  /// Contents of `latest`; nullopt when absent. Throws Error(Format) naming the file when unparsable.
  std::optional<uint32_t> latest() const;
  /// Writes `latest` atomically (tmp + rename + fsync of the directory). Throws Error(Lineage) if `version`
  /// is below the current pointer (forward only; equal is a no-op). Does not require `version` to be
  /// published: callers (the publisher) advance only after the publication is in place.
  void advance_latest(uint32_t version) const;

 private:
  std::filesystem::path root_;
};

}  // namespace wsb
