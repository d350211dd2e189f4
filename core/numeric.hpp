#pragma once
// Scalar conversions of stored codes (BF16 = upper 16 bits of IEEE binary32; F16 = IEEE binary16).
#include <cstdint>

namespace wsb {

float bf16_to_float(uint16_t code);
/// Round-to-nearest-even (matches torch's float32 -> bfloat16 cast for every non-NaN input); a NaN keeps sign and
/// payload with the quiet bit set (torch's scalar cast returns 0x7FC0 instead).
uint16_t float_to_bf16(float value);
float f16_to_float(uint16_t code);

}  // namespace wsb
