#pragma once
// Whole-file byte I/O for the test suites (standard library only, so suites of any library include it).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace wsb::test {

/// Every byte of the file at `path` ("" when it cannot be opened).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Replaces the file at `path` with `bytes` (created when absent).
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace wsb::test
