#pragma once
// Errors of the refit stream. Every message starts with "refit: rank R" (the rank where it was detected) and names
// the weight concerned, so the same text can be raised on every rank of the engine at once.
#include <string>

#include "core/errors.hpp"

namespace wsb::refit {

/// Throws Error(kind, "refit: rank <rank>: <what>").
[[noreturn]] void fail_rank(ErrorKind kind, int rank, const std::string& what);

}  // namespace wsb::refit
