#pragma once
// The arithmetic of the device matvec kernels (engine/quant/device_linear.hpp), as functions compiled for both the
// device and the host: the kernels are thin shells around them, and the tests run the same functions on the host
// (emulating the warp butterfly) to check the layout indexing and the math on machines without a GPU, and to
// demand bitwise equality with the device. C++17, no CUDA headers.
//
// Code decoders reproduce models/quant/codecs.hpp and core/numeric.hpp bit for bit (NaN payloads included);
// offset helpers reproduce models/transform/{fp8_channel,nvfp4,mxfp4}.hpp. Every multiply-add is an explicit fused
// multiply-add (correctly rounded on both sides), so the host emulation equals the device result bitwise.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/quant/device_linear.hpp"

#if defined(__CUDACC__)
#define WSBENCH_HD __host__ __device__ __forceinline__
#else
#define WSBENCH_HD inline
#endif

namespace wsb::quant {

inline constexpr int kWarp = 32;
inline constexpr int kNvfp4BlockK = 16;     ///< E2M1 elements per E4M3 block scale (ModelOpt NVFP4)
inline constexpr int kMxfp4BlockK = 32;     ///< E2M1 elements per E8M0 scale (OCP MX v1.0)
inline constexpr int kFp8Slices = 8;        ///< k-slices per FP8 output row (threadIdx.y)
inline constexpr int kFp8RowsPerBlock = 32; ///< FP8 output rows per block (threadIdx.x)
inline constexpr int kRowsPerBlock = 8;     ///< warps (= output rows) per block of the warp-per-row kernels

WSBENCH_HD float bits_to_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

WSBENCH_HD float fused_multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);  // correctly rounded, as __fmaf_rn
#endif
}

/// Quiet NaN written for a slot whose expert id is out of range.
WSBENCH_HD float bad_expert_value() { return bits_to_float(0x7FC00000u); }

/// E4M3 code -> float32 (codecs.cpp make_e4m3_table: NaN codes 0x7F/0xFF give sign | 0x7FF00000).
WSBENCH_HD float e4m3_value(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t exponent = (code >> 3) & 0xFu, mantissa = code & 0x7u;
  if ((code & 0x7Fu) == 0x7Fu) return bits_to_float(sign | 0x7FF00000u);
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;  // m * 2^-9, exact
    uint32_t bits;
#if defined(__CUDA_ARCH__)
    bits = __float_as_uint(magnitude);
#else
    std::memcpy(&bits, &magnitude, 4);
#endif
    return bits_to_float(sign | bits);
  }
  return bits_to_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));  // 2^(exponent - 7) * 1.m
}

/// E2M1 code in the low 4 bits -> float32: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; sign bit 3 (code 8 is -0.0).
WSBENCH_HD float e2m1_value(uint32_t nibble) {
  const uint32_t m = nibble & 0x7u, exponent = m >> 1, mantissa = m & 1u;
  const uint32_t magnitude = exponent == 0 ? (mantissa ? 0x3F000000u : 0u)  // 0.5 or 0
                                           : ((exponent + 126u) << 23) | (mantissa << 22);
  return bits_to_float(((nibble & 0x8u) << 28) | magnitude);
}

/// E8M0 code -> 2^(code - 127) (code 0 is the subnormal 2^-127; 0xFF is NaN 0x7FC00001 as in codecs.cpp).
WSBENCH_HD float e8m0_value(uint32_t code) {
  if (code == 0xFFu) return bits_to_float(0x7FC00001u);
  if (code == 0) return bits_to_float(0x00400000u);
  return bits_to_float(code << 23);
}

WSBENCH_HD float bf16_value(uint32_t code) { return bits_to_float(code << 16); }

/// binary16 -> float32 exactly as core/numeric.cpp f16_to_float.
WSBENCH_HD float f16_value(uint32_t code) {
  const uint32_t sign = (code & 0x8000u) << 16;
  const uint32_t exponent = (code >> 10) & 0x1Fu, mantissa = code & 0x3FFu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1Fu) return bits_to_float(sign | 0x7F800000u | (mantissa << 13));
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

WSBENCH_HD uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

/// 4-byte aligned float at p.
WSBENCH_HD float load_f32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const float*>(p);
#else
  float f;
  std::memcpy(&f, p, 4);
  return f;
#endif
}

/// 8-byte aligned little-endian word at p.
WSBENCH_HD uint64_t load_u64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint64_t*>(p);
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

// ---- runtime layout offsets (the formulas of models/transform/*.hpp, on logical indices) ----

/// fp8_channel_weight_offset: runtime [E, Kp, Np], N contiguous.
WSBENCH_HD int64_t fp8_weight_at(int64_t kp, int64_t np, int64_t e, int64_t n, int64_t k) { return (e * kp + k) * np + n; }

/// nvfp4_scale_offset: 128x4 tiles of [E, Mp, Kp].
WSBENCH_HD int64_t nvfp4_scale_at(int64_t mp, int64_t kp, int64_t e, int64_t m, int64_t k16) {
  const int64_t mt = m / 128, r4 = (m % 128) / 32, r32 = m % 32, kt = k16 / 4, k4 = k16 % 4;
  return e * mp * kp + mt * 128 * kp + kt * 512 + r32 * 16 + r4 * 4 + k4;
}

/// mxfp4_scale_offset: triton HopperMXScaleLayout of the logical [E, Mp, Kp] scales.
WSBENCH_HD int64_t mxfp4_scale_at(int64_t mp, int64_t kp, int64_t e, int64_t m, int64_t kb) {
  const int64_t a = m / 256, b = (m / 128) % 2, c = (m / 16) % 8, d = (m / 8) % 2, x = m % 8;
  const int64_t f = kb / 2, g = kb % 2;
  return e * mp * kp + (((((a * 8 + c) * (kp / 2) + f) * 2 + b) * 8 + x) * 2 + g) * 2 + d;
}

/// mxfp4_value_offset: [E, Np, Kb, 16]; a row's elements sit at byte k / 2 from the row start.
WSBENCH_HD int64_t mxfp4_value_at(int64_t np, int64_t kb, int64_t e, int64_t n, int64_t k) {
  return ((e * np + n) * kb + k / 32) * 16 + (k % 32) / 2;
}

/// nvfp4_weight_offset: U8 [E, rows, cols / 2].
WSBENCH_HD int64_t nvfp4_weight_at(int64_t rows, int64_t cols, int64_t e, int64_t n, int64_t k) {
  return (e * rows + n) * (cols / 2) + k / 2;
}

/// E2M1 code of element k of a packed row (element k in byte k / 2, low nibble for even k).
WSBENCH_HD uint32_t packed_nibble(const uint8_t* row, int64_t k) { return (row[k >> 1] >> ((k & 1) * 4)) & 0xFu; }

// ---- per-lane / per-slice partial sums ----

WSBENCH_HD float dense_at(DeviceDenseDtype dtype, const uint8_t* row, int64_t k) {
  switch (dtype) {
    case DeviceDenseDtype::BF16:
      return bf16_value(load_u16(row + 2 * k));
    case DeviceDenseDtype::F16:
      return f16_value(load_u16(row + 2 * k));
    default:
      return load_f32(row + 4 * k);
  }
}

WSBENCH_HD int64_t dense_element_bytes(DeviceDenseDtype dtype) { return dtype == DeviceDenseDtype::F32 ? 4 : 2; }

/// Dense row n of expert e: lane's sum over k = lane, lane + 32, ... of W[e][n][k] * x[k].
WSBENCH_HD float dense_lane_partial(const DeviceLinear& l, int64_t e, int64_t n, int lane, const float* x) {
  const int64_t esize = dense_element_bytes(l.dense_dtype);
  const uint8_t* row = l.weight + ((e * l.rows + n) * l.cols) * esize;
  float acc = 0.0f;
  for (int64_t k = lane; k < l.cols; k += kWarp) acc = fused_multiply_add(dense_at(l.dense_dtype, row, k), x[k], acc);
  return acc;
}

/// True when every 16-block of every Nvfp4 row is whole and 8-byte aligned (k_phase 0, cols % 16 == 0, weight
/// 8-byte aligned): the kernel then reads a block as one 64-bit word. Both paths sum in the same order.
WSBENCH_HD bool nvfp4_word_path(const DeviceLinear& l) {
  return l.k_phase == 0 && l.cols % kNvfp4BlockK == 0 && (reinterpret_cast<uintptr_t>(l.weight) & 7u) == 0;
}

/// Nvfp4 row n of expert e: the lane's sum over 16-blocks b = lane, lane + 32, ... (counted from k_phase) of
/// e4m3(scale[e, n, b]) * (sum over the block's k of e2m1(W[e,n,k]) * (x[k] * inv_input)).
WSBENCH_HD float nvfp4_lane_partial(const DeviceLinear& l, int64_t e, int64_t n, int lane, const float* x,
                                float inv_input, bool word_path) {
  const uint8_t* row = l.weight + nvfp4_weight_at(l.rows, l.cols, e, n, 0);
  const int64_t blocks = (l.k_phase + l.cols + kNvfp4BlockK - 1) / kNvfp4BlockK;
  float acc = 0.0f;
  for (int64_t b = lane; b < blocks; b += kWarp) {
    float part = 0.0f;
    if (word_path) {
      const uint64_t codes = load_u64(row + 8 * b);
      const float* xb = x + kNvfp4BlockK * b;
      for (int j = 0; j < kNvfp4BlockK; ++j)
        part = fused_multiply_add(e2m1_value(static_cast<uint32_t>(codes >> (4 * j))), xb[j] * inv_input, part);
    } else {
      const int64_t first = b * kNvfp4BlockK - l.k_phase;
      const int64_t begin = first < 0 ? 0 : first;
      const int64_t end = first + kNvfp4BlockK < l.cols ? first + kNvfp4BlockK : l.cols;
      for (int64_t k = begin; k < end; ++k)
        part = fused_multiply_add(e2m1_value(packed_nibble(row, k)), x[k] * inv_input, part);
    }
    const uint8_t code = l.scale[nvfp4_scale_at(l.scale_rows_padded, l.scale_cols_padded, e, n, b)];
    acc = fused_multiply_add(part, e4m3_value(code), acc);
  }
  return acc;
}

/// True when the Mxfp4 weight is 16-byte aligned: a whole 32-block is then read as two 64-bit words.
WSBENCH_HD bool mxfp4_word_path(const DeviceLinear& l) { return (reinterpret_cast<uintptr_t>(l.weight) & 15u) == 0; }

/// Mxfp4 row n of expert e: the lane's sum over 32-blocks b = lane, lane + 32, ... of
/// 2^(scale[e, n, b] - 127) * (sum over the block's k < cols of e2m1(W[e,n,k]) * x[k]).
WSBENCH_HD float mxfp4_lane_partial(const DeviceLinear& l, int64_t e, int64_t n, int lane, const float* x,
                                bool word_path) {
  const uint8_t* row = l.weight + mxfp4_value_at(l.weight_rows_padded, l.weight_cols_padded, e, n, 0);
  const int64_t blocks = (l.cols + kMxfp4BlockK - 1) / kMxfp4BlockK;
  float acc = 0.0f;
  for (int64_t b = lane; b < blocks; b += kWarp) {
    const int64_t first = b * kMxfp4BlockK;
    float part = 0.0f;
    if (word_path && first + kMxfp4BlockK <= l.cols) {
      const uint64_t lo = load_u64(row + 16 * b), hi = load_u64(row + 16 * b + 8);
      const float* xb = x + first;
      for (int j = 0; j < 16; ++j) part = fused_multiply_add(e2m1_value(static_cast<uint32_t>(lo >> (4 * j))), xb[j], part);
      for (int j = 0; j < 16; ++j)
        part = fused_multiply_add(e2m1_value(static_cast<uint32_t>(hi >> (4 * j))), xb[16 + j], part);
    } else {
      const int64_t end = first + kMxfp4BlockK < l.cols ? first + kMxfp4BlockK : l.cols;
      for (int64_t k = first; k < end; ++k) part = fused_multiply_add(e2m1_value(packed_nibble(row, k)), x[k], part);
    }
    const uint8_t code = l.scale[mxfp4_scale_at(l.scale_rows_padded, l.scale_cols_padded, e, n, b)];
    acc = fused_multiply_add(part, e8m0_value(code), acc);
  }
  return acc;
}

/// Fp8 row n of expert e: slice s's sum over k = s, s + 8, ... of e4m3(W[e,n,k]) * x[k] (before the channel scale).
WSBENCH_HD float fp8_slice_partial(const DeviceLinear& l, int64_t e, int64_t n, int slice, const float* x) {
  const uint8_t* column = l.weight + fp8_weight_at(l.weight_cols_padded, l.weight_rows_padded, e, n, 0);
  const int64_t stride = l.weight_rows_padded;  // bytes from k to k + 1
  float acc = 0.0f;
  for (int64_t k = slice; k < l.cols; k += kFp8Slices) acc = fused_multiply_add(e4m3_value(column[k * stride]), x[k], acc);
  return acc;
}

/// DenseKMajor row n of expert e: slice s's sum over k = s, s + 8, ... of W[e][k][n] * x[k] (weight [E, cols, rows],
/// the outputs contiguous; the k-slices as fp8_slice_partial, no scale).
WSBENCH_HD float dense_kmajor_slice_partial(const DeviceLinear& l, int64_t e, int64_t n, int slice, const float* x) {
  const int64_t esize = dense_element_bytes(l.dense_dtype);
  const uint8_t* column = l.weight + ((e * l.cols) * l.rows + n) * esize;
  const int64_t stride = l.rows * esize;  // bytes from k to k + 1
  float acc = 0.0f;
  for (int64_t k = slice; k < l.cols; k += kFp8Slices)
    acc = fused_multiply_add(dense_at(l.dense_dtype, column + k * stride, 0), x[k], acc);
  return acc;
}

/// F32 channel scale of (e, n).
WSBENCH_HD float fp8_channel_scale(const DeviceLinear& l, int64_t e, int64_t n) {
  return load_f32(l.scale + 4 * (e * l.scale_rows_padded + n));
}

/// 1 / input_scale[e], as the CPU computes it once per expert.
WSBENCH_HD float nvfp4_inv_input(const DeviceLinear& l, int64_t e) { return 1.0f / l.input_scale[e]; }

}  // namespace wsb::quant
