#include "models/forward/weight_kernels.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>

#include "core/errors.hpp"
#include "core/numeric.hpp"

namespace wsb {

namespace {

struct Bf16Codes {
  static constexpr size_t kSize = 2;
  static float at(const uint8_t* p, int64_t i) {
    uint16_t code;
    std::memcpy(&code, p + 2 * i, 2);
    return std::bit_cast<float>(static_cast<uint32_t>(code) << 16);  // BF16 = upper half of binary32
  }
};

/// binary16 -> float32 through a table of all 65536 codes (the scalar conversion branches per element).
const std::array<float, 65536>& f16_table() {
  static const auto table = [] {
    std::array<float, 65536> t{};
    for (uint32_t c = 0; c < 65536; ++c) t[c] = f16_to_float(static_cast<uint16_t>(c));
    return t;
  }();
  return table;
}

struct F16Codes {
  static constexpr size_t kSize = 2;
  static float at(const uint8_t* p, int64_t i) {
    uint16_t code;
    std::memcpy(&code, p + 2 * i, 2);
    return f16_table()[code];
  }
};

struct F32Codes {
  static constexpr size_t kSize = 4;
  static float at(const uint8_t* p, int64_t i) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
};

template <class Codes>
void matvec(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y) {
  const int64_t row_bytes = cols * static_cast<int64_t>(Codes::kSize);
  int64_t r = 0;
  // Eight independent accumulators (one per row) hide the float add latency; each still sums its own row in
  // column order.
  for (; r + 8 <= rows; r += 8) {
    const uint8_t* w0 = w + r * row_bytes;
    const uint8_t* w1 = w0 + row_bytes;
    const uint8_t* w2 = w1 + row_bytes;
    const uint8_t* w3 = w2 + row_bytes;
    const uint8_t* w4 = w3 + row_bytes;
    const uint8_t* w5 = w4 + row_bytes;
    const uint8_t* w6 = w5 + row_bytes;
    const uint8_t* w7 = w6 + row_bytes;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float xc = x[c];
      a0 += Codes::at(w0, c) * xc;
      a1 += Codes::at(w1, c) * xc;
      a2 += Codes::at(w2, c) * xc;
      a3 += Codes::at(w3, c) * xc;
      a4 += Codes::at(w4, c) * xc;
      a5 += Codes::at(w5, c) * xc;
      a6 += Codes::at(w6, c) * xc;
      a7 += Codes::at(w7, c) * xc;
    }
    y[r] = a0;
    y[r + 1] = a1;
    y[r + 2] = a2;
    y[r + 3] = a3;
    y[r + 4] = a4;
    y[r + 5] = a5;
    y[r + 6] = a6;
    y[r + 7] = a7;
  }
  for (; r < rows; ++r) {
    const uint8_t* w0 = w + r * row_bytes;
    float a0 = 0.0f;
    for (int64_t c = 0; c < cols; ++c) a0 += Codes::at(w0, c) * x[c];
    y[r] = a0;
  }
}

template <class Codes>
void matvec_kmajor(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y) {
  const int64_t row_bytes = rows * static_cast<int64_t>(Codes::kSize);
  for (int64_t r = 0; r < rows; ++r) y[r] = 0.0f;
  // One pass per input c over the contiguous outputs: every y[r] gains its c-th term in c order, so each output
  // is the same sum as the row-major kernel forms.
  for (int64_t c = 0; c < cols; ++c) {
    const uint8_t* wc = w + c * row_bytes;
    const float xc = x[c];
    for (int64_t r = 0; r < rows; ++r) y[r] += Codes::at(wc, r) * xc;
  }
}

template <class Codes>
void load_row(const uint8_t* w, int64_t row, int64_t cols, float* out) {
  const uint8_t* p = w + row * cols * static_cast<int64_t>(Codes::kSize);
  for (int64_t c = 0; c < cols; ++c) out[c] = Codes::at(p, c);
}

constexpr WeightKernels kBf16{&matvec<Bf16Codes>, &matvec_kmajor<Bf16Codes>, &load_row<Bf16Codes>};
constexpr WeightKernels kF16{&matvec<F16Codes>, &matvec_kmajor<F16Codes>, &load_row<F16Codes>};
constexpr WeightKernels kF32{&matvec<F32Codes>, &matvec_kmajor<F32Codes>, &load_row<F32Codes>};

}  // namespace

const WeightKernels& weight_kernels(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return kBf16;
    case DType::F16:
      return kF16;
    case DType::F32:
      return kF32;
    default:
      throw Error(
          ErrorKind::Format,
          fmt::format("reference forward pass: weight dtype {} is not supported (BF16, F16, F32)", dtype_name(dtype)));
  }
}

}  // namespace wsb
