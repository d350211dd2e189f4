#pragma once
// Matrix-vector kernels over stored weights (row-major, BF16/F16/F32 codes) with float32 accumulation.
// Every output element is one sum over its row in column order starting from 0.0f, so results do not depend on
// how many rows are computed together (interleaving rows only adds instruction-level parallelism).
#include <cstdint>

#include "core/dtype.hpp"

namespace wsb {

/// Kernels for one weight dtype. `w` points at element [0][0] of a row-major [rows, cols] matrix; it may be
/// unaligned (weights are read with memcpy).
struct WeightKernels {
  /// y[r] = sum over c = 0..cols-1 of float(W[r][c]) * x[c], for r in [0, rows).
  void (*matvec)(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y);
  /// The same product over a K-major matrix: `w` is row-major [cols, rows] (W^T, the outputs contiguous), and
  /// y[r] = sum over c = 0..cols-1 of float(W^T[c][r]) * x[c], each y[r] still summed in c order from 0.0f.
  void (*matvec_kmajor)(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y);
  /// out[c] = float(W[row][c]) for c in [0, cols): exact widening (as torch's .float()).
  void (*load_row)(const uint8_t* w, int64_t row, int64_t cols, float* out);
};

/// Kernels for BF16, F16 or F32 weights. Throws Error(Format) naming the dtype otherwise.
const WeightKernels& weight_kernels(DType dtype);

}  // namespace wsb
