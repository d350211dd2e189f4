#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace wsb {

using Shape = std::vector<int64_t>;

/// Element count of a shape (1 for a scalar, shape []).
uint64_t shape_numel(const Shape& shape);
/// "[4096, 128]"
std::string shape_string(const Shape& shape);

/// One tensor of the canonical checkpoint: name, dtype, shape. Bytes = numel * dtype_size.
struct TensorSpec {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;

  uint64_t numel() const { return shape_numel(shape); }
  uint64_t bytes() const;
  bool operator==(const TensorSpec&) const = default;
};

}  // namespace wsb
