#pragma once
// Error taxonomy shared by every layer. Messages always name the file / tensor / field concerned.
#include <stdexcept>
#include <string>

namespace wsb {

/// What went wrong, so callers can react without parsing messages.
enum class ErrorKind {
  Format,     ///< malformed input (safetensors header, index, manifest, payload encoding)
  Truncated,  ///< a file shorter than it declares: "not yet published", retryable
  Checksum,   ///< content hash differs from the publisher's
  Lineage,    ///< wrong base version, gap, backwards pointer
  State,      ///< prepare/commit state-machine rule violated
  Missing,    ///< file, tensor or version absent
  Mismatch,   ///< shape / dtype / name sets disagree
  Io,         ///< operating-system error (errno text included)
  Fatal,      ///< engine must stop serving (mutation started and failed)
  Resource,   ///< a machine resource is absent or too small (no GPU, device memory, pinned memory)
};

const char* error_kind_name(ErrorKind kind);

/// Base exception of wsbench. `what()` is the full human message.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  bool retryable() const { return kind_ == ErrorKind::Truncated; }

 private:
  ErrorKind kind_;
};

}  // namespace wsb
