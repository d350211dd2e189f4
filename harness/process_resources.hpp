#pragma once
// Point-in-time readings of what a long run may leak: open file descriptors, resident memory, the page cache held
// by a folder's files and the host's page cache. The soak (harness/soak.hpp) takes one after every update cycle.
#include <cstdint>
#include <filesystem>
#include <optional>

namespace wsb {

/// Open file descriptors of this process: entries of /proc/self/fd, without the one reading it.
/// Throws Error(Io) when /proc/self/fd cannot be read.
uint64_t open_fd_count();

/// Resident bytes of this process now (/proc/self/statm); nullopt when unreadable.
std::optional<uint64_t> resident_bytes();

/// Bytes of the regular files under `dir` that are in the page cache (mincore(2) over each file, mapped and
/// unmapped again: no page is read). Files that cannot be opened count 0; a missing `dir` is 0 bytes.
uint64_t page_cache_bytes(const std::filesystem::path& dir);

/// Cached of /proc/meminfo: the page cache of the whole host (every process's files), bytes; nullopt when absent.
std::optional<uint64_t> host_page_cache_bytes();

}  // namespace wsb
