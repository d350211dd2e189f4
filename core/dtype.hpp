#pragma once
// Element types of safetensors tensors (safetensors spec, "dtype" field).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace wsb {

enum class DType : uint8_t {
  BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2, F8_E8M0,
};

/// Spec spelling, e.g. "BF16", "F8_E4M3".
std::string_view dtype_name(DType dtype);
/// Parses the spec spelling; nullopt for unknown or sub-byte types (F4, F6_*), which wsbench does not store.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
size_t dtype_size(DType dtype);
/// True for the floating-point types whose stored codes the publisher perturbs.
bool dtype_is_float(DType dtype);

}  // namespace wsb
