#include "modes/refit/transport.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb::refit {

void check_bucket_sizes(uint64_t sender_bytes, uint64_t receiver_bytes) {
  if (sender_bytes != receiver_bytes) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit: bucket_size_bytes mismatch: sender {} B, receiver {} B (both sides must use the "
                            "same size)",
                            sender_bytes, receiver_bytes));
  }
  if (sender_bytes == 0) throw Error(ErrorKind::Mismatch, "refit: bucket_size_bytes must be > 0");
}

}  // namespace wsb::refit
