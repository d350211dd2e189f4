#include "core/tensor_spec.hpp"

#include <fmt/format.h>

namespace wsb {

uint64_t shape_numel(const Shape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

uint64_t TensorSpec::bytes() const { return numel() * dtype_size(dtype); }

}  // namespace wsb
