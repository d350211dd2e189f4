#pragma once
// Small POSIX helpers shared by the checkpoint readers and writers. Every error names the file concerned.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace wsb {

/// Reads a whole (small) file, e.g. an index. Throws Error(Missing) when it does not exist, Error(Io) otherwise.
std::string read_text_file(const std::filesystem::path& path);

/// Writes `size` bytes to `fd`, retrying short writes and EINTR. Throws Error(Io) naming `path`.
void write_all(int fd, const void* data, size_t size, const std::filesystem::path& path);

/// fsyncs the directory holding `path`, so a rename into it is durable. Throws Error(Io).
void fsync_parent_dir(const std::filesystem::path& path);

/// Writes `content` to `path`.tmp, fsyncs it (and the directory) when asked, renames onto `path`.
/// Readers therefore never observe a partly written file. Throws Error(Io) naming the file.
void write_file_atomic(const std::filesystem::path& path, std::string_view content, bool fsync_file);

/// `path` + ".tmp": the name a file is written under before its atomic rename.
std::filesystem::path tmp_path_for(const std::filesystem::path& path);

}  // namespace wsb
