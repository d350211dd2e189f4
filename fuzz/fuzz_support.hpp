#pragma once
// Shared by the fuzz targets. The contract every target checks: a parser may refuse input only with a wsb::Error
// of a kind its header documents; any other exception, a sanitizer report, or a broken invariant on accepted
// input is a finding, so it aborts and libFuzzer keeps the input as a crash artifact.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/errors.hpp"

namespace wsb::fuzz {

/// Prints why the input is a finding and aborts (libFuzzer records SIGABRT as a crash).
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Aborts with `what` unless `ok`: invariants of accepted input.
inline void require(bool ok, const std::string& what) {
  if (!ok) finding(what);
}

/// Runs `body`. Returns true when it completed, false when it threw a wsb::Error of one of the `allowed` kinds
/// (the documented refusal, whose message goes to `message` when given); any other outcome is a finding.
template <class Body>
bool only_documented_errors(std::initializer_list<ErrorKind> allowed, Body&& body, std::string* message = nullptr) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    for (ErrorKind kind : allowed) {
      if (e.kind() != kind) continue;
      if (message != nullptr) *message = e.what();
      return false;
    }
    finding(std::string("wsb::Error of undocumented kind ") + error_kind_name(e.kind()) + ": " + e.what());
  } catch (const std::exception& e) {
    finding(std::string("non-wsb exception ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding("non-std exception");
  }
}

/// An anonymous in-memory file (memfd) reachable by path, for readers that open a path: the target then runs
/// the exact production code (open, fstat, mmap/read) with no disk I/O and nothing to clean up.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("wsb-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) finding("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  /// Replaces the file's content with `data`.
  void assign(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) finding("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) finding("pwrite failed");
      done += static_cast<size_t>(n);
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

/// Little-endian u32 at `p` (the targets' size prefixes).
inline uint32_t le_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

/// The payload targets' input: a u32 little-endian tensor size, taken modulo `max_tensor_bytes` + 1 so memory stays
/// bounded, then the payload.
struct SizedPayload {
  size_t tensor_bytes = 0;
  std::span<const uint8_t> payload;
};

/// Splits `input` into a SizedPayload; nullopt when it is shorter than the size prefix.
inline std::optional<SizedPayload> sized_payload(const uint8_t* input, size_t input_size, size_t max_tensor_bytes) {
  if (input_size < 4) return std::nullopt;
  return SizedPayload{le_u32(input) % (max_tensor_bytes + 1), std::span<const uint8_t>(input + 4, input_size - 4)};
}

/// Largest tensor (bytes) the payload targets decode into: above zstd's 128 KiB block and the xor stream's
/// 256 KiB chunk, so multi-block frames and multi-chunk streams are reached.
constexpr size_t kMaxTensorBytes = size_t{1} << 20;

/// A tensor's bytes before the update: kMaxTensorBytes of a fixed non-uniform pattern (so a wrong restore cannot
/// go unnoticed), built once.
inline const std::vector<uint8_t>& base_pattern() {
  static const std::vector<uint8_t> base = [] {
    std::vector<uint8_t> b(kMaxTensorBytes);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
    return b;
  }();
  return base;
}

// Per-byte oracle loops, left out of coverage by fuzz/coverage_ignore.txt (matched by namespace name): their
// per-byte branch is the loop bound, which gives libFuzzer nothing but costs a trace call per byte.
namespace no_coverage {

/// True when the three spans have one length and before[i] ^ mask[i] == after[i] for every i.
inline bool xor_relates(std::span<const uint8_t> before, std::span<const uint8_t> mask,
                        std::span<const uint8_t> after) {
  if (mask.size() != before.size() || after.size() != before.size()) return false;
  uint8_t differ = 0;
  for (size_t i = 0; i < before.size(); ++i) differ |= static_cast<uint8_t>((before[i] ^ mask[i]) ^ after[i]);
  return differ == 0;
}

}  // namespace no_coverage

}  // namespace wsb::fuzz
