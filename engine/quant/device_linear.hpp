#pragma once
// Device dequantizing matrix-vector product over the runtime storages of the quantized MoE families: the CUDA twin
// of models/forward/quant_linear.hpp (same formats, same math, same runtime byte layouts; read that header's format
// rules). C++17-clean and free of CUDA headers, so C++20 code and .cu files both include it; build a DeviceLinear
// from a checked QuantLinear with engine/quant/device_linear_bind.hpp.
//
// Kernel structure (deterministic: fixed reduction order, float32 accumulation with explicit fused multiply-adds,
// no atomics; the result is a pure function of the bytes, the shape and x):
//   Dense / Nvfp4 / Mxfp4: one warp per output row. Lane l takes the row's units l, l + 32, l + 64, ... (a unit is
//     one element for Dense, one 16-block counted from k_phase for Nvfp4, one 32-block for Mxfp4) and sums them in
//     ascending order; the 32 lane sums are combined by a butterfly (xor 16, 8, 4, 2, 1) that leaves every lane the
//     same value. Per block: part = sum over its k in ascending order of value(code) * x[k] (Nvfp4: * xs[k] with
//     xs[k] = x[k] * (1 / input_scale[e]), computed per element as the CPU does), then the lane sum gains
//     part * scale(block). Epilogue: Nvfp4 multiplies by alpha[e].
//   Fp8Channel and DenseKMajor (weight stored K-major, N contiguous): one thread per output row and 8 k-slices per
//     row; slice s sums k = s, s + 8, s + 16, ... in ascending order; the slices are added in order 0..7, then (Fp8)
//     multiplied by the channel scale. A warp reads 32 consecutive elements of one k row, which is what the K-major
//     layout allows.
// The results agree with the CPU linear_matvec to float rounding (different summation order), and are bitwise
// equal to the host emulation in engine/quant/matvec_math.hpp (tests/engine/quant check both).
#include <cstdint>

// cudaStream_t without cuda_runtime.h: the same typedef as CUDA's driver_types.h (a repeated typedef of the same
// type is valid C++), so this header compiles in builds without CUDA.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace wsb {

/// Storage format of a DeviceLinear (mirrors wsb::LinearFormat of models/forward/quant_linear.hpp).
enum class DeviceLinearFormat : int32_t { Dense = 0, Fp8Channel = 1, Nvfp4 = 2, Mxfp4 = 3, DenseKMajor = 4 };

/// Element type of a Dense weight.
enum class DeviceDenseDtype : int32_t { BF16 = 0, F16 = 1, F32 = 2 };

/// A linear layer y = W x over runtime storages in device memory (plain data; pass by value to kernels). Pointers
/// are device addresses of whole runtime storages; `rows`/`cols` are the logical output/input sizes (padding is
/// never read). Per format (shapes as the runtime storage specs declare them, models/transform/*.hpp):
///   Dense:      weight [E, rows, cols] (or [rows, cols], E = 1) of dense_dtype, row-major.
///   DenseKMajor: weight [E, cols, rows] (or [cols, rows]) of dense_dtype, row-major: element (e, n, k) at
///               (e * cols + k) * rows + n (gpt_oss BF16 experts, models/layout/moe_layout.hpp).
///   Fp8Channel: weight F8_E4M3 [E, Kp, Np], element (e, n, k) at byte (e * Kp + k) * Np + n; scale F32 [E, Np].
///               weight_rows_padded = Np, weight_cols_padded = Kp, scale_rows_padded = Np.
///   Nvfp4:      weight U8 [E, rows, cols / 2] (low nibble = even k); scale F8_E4M3 [E, Mp, Kp] in the 128x4 tile
///               order (nvfp4_scale_offset); alpha, input_scale F32 [E]. scale_rows_padded = Mp,
///               scale_cols_padded = Kp (16-blocks), k_phase = global K start of the slice % 16.
///   Mxfp4:      weight U8 [E, Np, Kb, 16] (mxfp4_value_offset); scale U8 E8M0 [E, Mp / 32, Kp * 32] in the Hopper
///               swizzle (mxfp4_scale_offset). weight_rows_padded = Np, weight_cols_padded = Kb,
///               scale_rows_padded = Mp, scale_cols_padded = Kp (32-blocks).
/// Float storages (Fp8 scale, alpha, input_scale) must be 4-byte aligned.
struct DeviceLinear {
  DeviceLinearFormat format = DeviceLinearFormat::Dense;
  DeviceDenseDtype dense_dtype = DeviceDenseDtype::BF16;  ///< Dense and DenseKMajor only
  const uint8_t* weight = nullptr;
  const uint8_t* scale = nullptr;        ///< Fp8: F32 channel scale; Nvfp4: E4M3 block scale; Mxfp4: E8M0
  const float* alpha = nullptr;          ///< Nvfp4: F32 [E] input_scale * weight_scale_2
  const float* input_scale = nullptr;    ///< Nvfp4: F32 [E]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t experts = 1;
  int64_t k_phase = 0;                   ///< Nvfp4 only, in [0, 16)
  int64_t weight_rows_padded = 0;        ///< Fp8: Np; Mxfp4: Np; Dense/DenseKMajor/Nvfp4: rows
  int64_t weight_cols_padded = 0;        ///< Fp8: Kp; Mxfp4: Kb (32-blocks); Dense/DenseKMajor/Nvfp4: cols
  int64_t scale_rows_padded = 0;         ///< Fp8: Np; Nvfp4: Mp; Mxfp4: Mp; Dense: 0
  int64_t scale_cols_padded = 0;         ///< Nvfp4: Kp (16-blocks); Mxfp4: Kp (32-blocks); else 0
};

/// "dense", "fp8_channel", "nvfp4", "mxfp4" or "dense_kmajor" (error messages, benchmark labels); "unknown"
/// otherwise.
inline const char* device_linear_format_name(DeviceLinearFormat format) {
  switch (format) {
    case DeviceLinearFormat::Dense:
      return "dense";
    case DeviceLinearFormat::Fp8Channel:
      return "fp8_channel";
    case DeviceLinearFormat::Nvfp4:
      return "nvfp4";
    case DeviceLinearFormat::Mxfp4:
      return "mxfp4";
    case DeviceLinearFormat::DenseKMajor:
      return "dense_kmajor";
  }
  return "unknown";
}

/// Enqueues y_j[n] = sum_k W[expert_j][n][k] x_j[k] for j in [0, k), n in [0, rows), on `stream` of the current
/// device (the device holding the storages). `expert_ids` is a device array of k int32 expert indices, read by the
/// kernel (so MoE routing computed on the device can stay inside a captured CUDA graph), or nullptr for expert 0 in
/// every slot. `x` is a device array: slot j reads x + j * x_stride (x_stride in floats, >= cols; 0 = every slot
/// shares one input of cols floats). `y` is a device array of k * rows floats (slot j at y + j * rows). An expert id
/// outside [0, experts) cannot raise an error from the device: that slot's outputs are all NaN.
/// Launches only (no synchronization, no allocation): safe inside stream capture. k == 0 enqueues nothing.
/// Throws Error(Mismatch) "launch_linear_matvec (<format> <rows> x <cols>): <field> ..." for an inconsistent
/// DeviceLinear (null or misaligned pointer, padded dims smaller than the logical ones, odd Nvfp4 cols, k_phase
/// outside [0, 16)), a negative k or k > 65535, or 0 < x_stride < cols; Error(Resource) when no CUDA device is
/// usable or the build has no CUDA ("built without CUDA"); Error(Io) naming the kernel on another launch failure.
void launch_linear_matvec(const DeviceLinear& l, const int32_t* expert_ids, int k, const float* x, int64_t x_stride,
                          float* y, cudaStream_t stream);

}  // namespace wsb
