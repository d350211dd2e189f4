#include "core/dtype.hpp"

#include <array>

namespace wsb {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
  bool is_float;
};

// Spellings and widths from the safetensors spec's Dtype enum.
constexpr std::array<DTypeInfo, 16> kTable{{
    {DType::BOOL, "BOOL", 1, false},     {DType::U8, "U8", 1, false},
    {DType::I8, "I8", 1, false},         {DType::U16, "U16", 2, false},
    {DType::I16, "I16", 2, false},       {DType::U32, "U32", 4, false},
    {DType::I32, "I32", 4, false},       {DType::U64, "U64", 8, false},
    {DType::I64, "I64", 8, false},       {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},      {DType::F32, "F32", 4, true},
    {DType::F64, "F64", 8, true},        {DType::F8_E4M3, "F8_E4M3", 1, true},
    {DType::F8_E5M2, "F8_E5M2", 1, true}, {DType::F8_E8M0, "F8_E8M0", 1, true},
}};

const DTypeInfo& info(DType dtype) { return kTable[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kTable) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

size_t dtype_size(DType dtype) { return info(dtype).size; }

bool dtype_is_float(DType dtype) { return info(dtype).is_float; }

}  // namespace wsb
