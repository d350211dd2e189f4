#pragma once
// Matrix-vector products over the runtime storages of the quantized MoE families (models/layout/moe_layout.hpp),
// dequantizing inside the kernel: the weights are never widened into a float copy, every call re-reads the
// runtime bytes through the layout accessors (models/layout/moe_access.hpp), so a wrong transform, swizzle or
// scale shows in the result.
//
// Per format, for output row n of expert e (float32 accumulation, fixed order, no threads):
//   Dense  (BF16/F16/F32, transform none, [N, K] or [E, N, K]):  y[n] = sum_k W[n][k] x[k] (weight_kernels).
//   DenseKMajor (BF16/F16/F32, transform none, [K, N] or [E, K, N], the outputs contiguous: gpt_oss BF16 experts
//          as SGLang's triton_kernels MoE holds them): y[n] = sum_k W[k][n] x[k], summed in k order.
//   Fp8    (fp8_channel_weight + fp8_channel_scale): y[n] = (sum_k e4m3(W[e,n,k]) x[k]) * scale[e,n]. The per-channel
//          scale is applied in the epilogue, as the channel-scaled FP8 GEMMs of SGLang/vLLM do; activations stay
//          float32 (the engines' dynamic per-token FP8 activation quantization is not modelled).
//   Nvfp4  (U8 packed E2M1 + nvfp4_scale_swizzle E4M3 block scales + per-expert F32 alpha and input_scale):
//          xs[k] = x[k] * (1 / input_scale[e]);
//          y[n]  = alpha[e] * sum over 16-blocks b of e4m3(scale[e, n, b]) * (sum_{k in b} e2m1(W[e,n,k]) xs[k]),
//          i.e. what FlashInfer's CUTLASS NVFP4 MoE computes (activation scaled by the input global scale
//          1/input_scale, block-scaled MMA, epilogue alpha = input_scale * weight_scale_2; SGLang
//          ModelOptNvFp4FusedMoEMethod), except that xs is not rounded to FP4. In exact arithmetic this is
//          e2m1 * e4m3 * weight_scale_2 (models/profile/moe_family.hpp); weight_scale_2 itself is read only through
//          alpha. Blocks are counted from the rank's K phase (k_phase = global K start % 16), so a 16-block that
//          straddles two ranks is split there and each rank applies the same scale to its part.
//   Mxfp4  (mxfp4_pad U8 [E, Np, Kb, 16] + mxfp4_scale_swizzle E8M0):
//          y[n] = sum over 32-blocks b of 2^(scale[e,n,b] - 127) * (sum_{k in b} e2m1(W[e,n,k]) x[k]).
// Logical rows/cols are the unpadded sizes; padding is never read.
#include <cstdint>

#include "models/forward/weight_kernels.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

/// One runtime storage of one rank: its spec and its bytes (the caller's memory, re-read at every call).
struct StorageRef {
  const RuntimeStorageSpec* spec = nullptr;
  const uint8_t* data = nullptr;
};

enum class LinearFormat { Dense, Fp8Channel, Nvfp4, Mxfp4, DenseKMajor };

/// A linear layer y = W x bound to runtime storages: a 2-D weight, or every expert of a stacked [E, ...] one.
/// `rows`/`cols` are the logical output/input sizes. Build with the *_linear functions, which check the storages.
struct QuantLinear {
  LinearFormat format = LinearFormat::Dense;
  StorageRef weight;
  StorageRef scale;        ///< Fp8: F32 channel scale; Nvfp4: E4M3 block scale; Mxfp4: E8M0 block scale
  StorageRef alpha;        ///< Nvfp4: F32 [E] input_scale * weight_scale_2
  StorageRef input_scale;  ///< Nvfp4: F32 [E]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t experts = 1;  ///< 1 for a 2-D weight
  int64_t k_phase = 0;  ///< Nvfp4: global K start of the rank's slice modulo 16
  const WeightKernels* dense = nullptr;
};

/// BF16/F16/F32 weight, transform none, shape [rows, cols] or [E, rows, cols].
/// Throws Error(Mismatch) naming the storage when dtype, transform or shape differ.
QuantLinear dense_linear(StorageRef weight, int64_t rows, int64_t cols);
/// BF16/F16/F32 K-major weight, transform none, shape [cols, rows] or [E, cols, rows] (element (e, n, k) at
/// (e * cols + k) * rows + n). Throws Error(Mismatch) naming the storage when dtype, transform or shape differ.
QuantLinear dense_kmajor_linear(StorageRef weight, int64_t rows, int64_t cols);
/// FP8 per-channel weight [Kp, Np] / [E, Kp, Np] (transform fp8_channel_weight, F8_E4M3) with its scale [Np] /
/// [E, Np] (fp8_channel_scale, F32); Np >= rows, Kp >= cols. Throws Error(Mismatch) naming the storage.
QuantLinear fp8_linear(StorageRef weight, StorageRef scale, int64_t rows, int64_t cols);
/// NVFP4 stacked experts: weight U8 [E, rows, cols/2] (transform none), scale F8_E4M3 nvfp4_scale_swizzle
/// [E, Mp >= rows, Kp >= ceil((k_phase + cols)/16)], alpha and input_scale F32 [E]. cols must be even.
/// Throws Error(Mismatch) naming the storage.
QuantLinear nvfp4_linear(StorageRef weight, StorageRef scale, StorageRef alpha, StorageRef input_scale, int64_t rows,
                         int64_t cols, int64_t k_phase);
/// MXFP4 stacked experts: weight U8 mxfp4_pad [E, Np >= rows, Kb >= ceil(cols/32), 16], scale U8
/// mxfp4_scale_swizzle [E, Mp/32, Kp*32] with Mp >= rows, Kp >= ceil(cols/32). Throws Error(Mismatch).
QuantLinear mxfp4_linear(StorageRef weight, StorageRef scale, int64_t rows, int64_t cols);

/// Checks that `r` is bound and holds dtype `dtype` with runtime shape `shape` (biases, sinks, norms); returns it.
/// Throws Error(Mismatch) naming the storage otherwise.
StorageRef require_storage(StorageRef r, DType dtype, const Shape& shape);

/// Copies F32 [n] storage `r` (e.g. a router's correction bias) into out[0..n). Throws Error(Mismatch) naming the
/// storage when it is not F32 [n].
void read_f32(const StorageRef& r, int64_t n, float* out);

/// y[n] = sum_k W[expert][n][k] x[k] for n < rows, per the format rules above. x has cols floats, y rows floats;
/// `scratch` holds at least cols floats (used by Nvfp4). Throws Error(Mismatch) for expert outside [0, experts).
void linear_matvec(const QuantLinear& linear, int64_t expert, const float* x, float* y, float* scratch);

}  // namespace wsb
