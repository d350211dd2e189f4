#include "models/transform/transform_util.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

void transform_mismatch(const TransformIo& io, std::string_view name, std::string_view why) {
  throw Error(ErrorKind::Mismatch, fmt::format("storage '{}': transform '{}': {}", io.storage, name, why));
}

void expect_io(const TransformIo& io, std::string_view name, DType want, size_t gathered_rank, size_t runtime_rank) {
  if (io.dtype != want)
    transform_mismatch(io, name, fmt::format("dtype {} is not {}", dtype_name(io.dtype), dtype_name(want)));
  if (io.gathered_shape.size() != gathered_rank || io.runtime_shape.size() != runtime_rank)
    transform_mismatch(io, name,
                       fmt::format("gathered {} / runtime {} must have {} / {} dims", shape_string(io.gathered_shape),
                                   shape_string(io.runtime_shape), gathered_rank, runtime_rank));
}

}  // namespace wsb
