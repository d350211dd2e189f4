#include "core/errors.hpp"

namespace wsb {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Format: return "format";
    case ErrorKind::Truncated: return "truncated";
    case ErrorKind::Checksum: return "checksum";
    case ErrorKind::Lineage: return "lineage";
    case ErrorKind::State: return "state";
    case ErrorKind::Missing: return "missing";
    case ErrorKind::Mismatch: return "mismatch";
    case ErrorKind::Io: return "io";
    case ErrorKind::Fatal: return "fatal";
    case ErrorKind::Resource: return "resource";
  }
  return "unknown";
}

}  // namespace wsb
