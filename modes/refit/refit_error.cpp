#include "modes/refit/refit_error.hpp"

#include <fmt/format.h>

namespace wsb::refit {

void fail_rank(ErrorKind kind, int rank, const std::string& what) {
  throw Error(kind, fmt::format("refit: rank {}: {}", rank, what));
}

}  // namespace wsb::refit
