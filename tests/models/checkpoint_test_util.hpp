#pragma once
// Helpers shared by the checkpoint tests: a fresh temp directory, raw file writing (error assertions:
// tests/support/error_checks.hpp).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/file_bytes.hpp"

namespace wsb::testutil {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "wsb-ckpt-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

using test::read_bytes;
using test::write_bytes;

/// 8-byte little-endian length (safetensors spec).
inline std::string le_u64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

/// A safetensors file with the given header text and `data_bytes` data bytes (values 0, 1, 2, ...).
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header, size_t data_bytes) {
  std::string bytes = le_u64(header.size()) + header;
  for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<char>(i & 0xFF));
  write_bytes(path, bytes);
}

}  // namespace wsb::testutil
