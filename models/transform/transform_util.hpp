#pragma once
// Helpers shared by the transform modules (internal to models/transform).
#include <cstdint>
#include <string_view>

#include "models/transform/transform.hpp"

namespace wsb {

/// Smallest multiple of `m` >= `x` (x >= 0, m > 0).
constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Throws Error(Mismatch) "storage '<storage>': transform '<name>': <why>".
[[noreturn]] void transform_mismatch(const TransformIo& io, std::string_view name, std::string_view why);
/// Checks io.dtype == want and the rank of both shapes; throws transform_mismatch otherwise.
void expect_io(const TransformIo& io, std::string_view name, DType want, size_t gathered_rank, size_t runtime_rank);

}  // namespace wsb
