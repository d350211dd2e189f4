#pragma once
// NVFP4 (ModelOpt) post-load transforms for stacked routed experts, as FlashInfer's CUTLASS fused-MoE reads them
// (SGLang ModelOptNvFp4FusedMoEMethod.process_weights_after_loading).
//
// Weights keep the canonical packed layout (transform "none"): w13/w2 U8 [E, N, K/2]; element (e, n, k) is the
// E2M1 code in byte (e * N + n) * (K/2) + k/2, low nibble for even k, high nibble for odd k (nvfp4_weight_offset).
//
// Block scales (transform kNvfp4ScaleSwizzle): gathered F8_E4M3 [E, M, K16] (M = weight rows N, K16 = K/16 scale
// columns of this rank) -> runtime F8_E4M3 [E, Mp, Kp] with Mp = round_up(M, 128), Kp = round_up(K16, 4), in the
// 128x4 tile order of the tensor-core block-scale layout (cuBLAS/CUTLASS "128x4 swizzle"):
//   m = 128*mt + 32*r4 + r32, k = 4*kt + k4   (0 <= r32 < 32, 0 <= r4 < 4, 0 <= k4 < 4)
//   byte(e, m, k) = e*Mp*Kp + mt*128*Kp + kt*512 + r32*16 + r4*4 + k4
// Padding entries are 0x00 (E4M3 +0.0). The runtime shape is written [E, Mp, Kp] but the bytes are NOT row-major:
// always go through nvfp4_scale_offset.
//
// Per-expert scalars, F32 [E] (transforms below), from per-expert fragments of F32 scalars:
//   w13_weight_scale_2[e] = gate.weight_scale_2[e]; up's must be bit-identical (FlashInfer applies one global
//                           scale to the fused [up; gate] GEMM) else Error(Mismatch) naming both tensors.
//   w13_input_scale[e]    = max(gate.input_scale[e], up.input_scale[e]) (both quantize the same activation; SGLang
//                           keeps the max so neither overflows).
//   w13_alpha[e]          = w13_input_scale[e] * w13_weight_scale_2[e]   (F32 product, the GEMM epilogue scale)
//   w2_alpha[e]           = down.input_scale[e] * down.weight_scale_2[e]
// Dequantized weight (for a reference forward): e2m1(code) * e4m3(scale) * weight_scale_2.
//
// Device path (comes with the GPU issue; no CUDA here): the gathered scale shards are copied to the device through
// a bounded staging buffer (a fixed number of experts per chunk, double-buffered), and a kernel writes each
// swizzled byte straight into the live runtime storage at nvfp4_scale_offset, zero-filling the padding; the
// per-expert scalars (E floats) are computed on the host and copied as is. Weights go H2D unchanged.
#include <cstdint>

#include "models/transform/transform.hpp"

namespace wsb {

inline constexpr std::string_view kNvfp4ScaleSwizzle = "nvfp4_scale_swizzle";
/// gathered F32 [E, 2] = (gate.weight_scale_2, up.weight_scale_2) per expert -> [E].
inline constexpr std::string_view kNvfp4W13Scale2 = "nvfp4_w13_scale_2";
/// gathered F32 [E, 2] = (gate.input_scale, up.input_scale) per expert -> [E] (max).
inline constexpr std::string_view kNvfp4W13InputScale = "nvfp4_w13_input_scale";
/// gathered F32 [E, 4] = (gate.input_scale, up.input_scale, gate.weight_scale_2, up.weight_scale_2) -> [E].
inline constexpr std::string_view kNvfp4W13Alpha = "nvfp4_w13_alpha";
/// gathered F32 [E, 2] = (down.input_scale, down.weight_scale_2) per expert -> [E].
inline constexpr std::string_view kNvfp4W2Alpha = "nvfp4_w2_alpha";

inline constexpr int64_t kNvfp4TileRows = 128;
inline constexpr int64_t kNvfp4TileCols = 4;

/// Runtime shape of a gathered scale [E, M, K16]: [E, round_up(M, 128), round_up(K16, 4)]; empty if not 3-D.
Shape nvfp4_scale_swizzled_shape(const Shape& gathered);
/// Byte offset of scale (expert, m, k16) in a swizzled runtime scale of shape [E, Mp, Kp] (formula above).
uint64_t nvfp4_scale_offset(const Shape& runtime, int64_t expert, int64_t m, int64_t k16);
/// Byte offset of the packed byte holding weight element (expert, n, k) in a U8 weight [E, N, K/2]; the element
/// is its low nibble when k is even, its high nibble when k is odd.
uint64_t nvfp4_weight_offset(const Shape& weight_shape, int64_t expert, int64_t n, int64_t k);

/// Transform kNvfp4ScaleSwizzle: dtype F8_E4M3, runtime == nvfp4_scale_swizzled_shape(gathered), else
/// Error(Mismatch) naming the storage.
void nvfp4_scale_swizzle_transform(const TransformIo& io);
/// Transform kNvfp4W13Scale2: throws Error(Mismatch) "... weight_scale_2 of '<gate>' (<v>) differs from
/// '<up>' (<v>)" naming both canonical tensors (io.sources[2e], io.sources[2e+1]).
void nvfp4_w13_scale_2_transform(const TransformIo& io);
/// Transform kNvfp4W13InputScale.
void nvfp4_w13_input_scale_transform(const TransformIo& io);
/// Transform kNvfp4W13Alpha: same weight_scale_2 check as kNvfp4W13Scale2 (sources[4e+2], sources[4e+3]).
void nvfp4_w13_alpha_transform(const TransformIo& io);
/// Transform kNvfp4W2Alpha.
void nvfp4_w2_alpha_transform(const TransformIo& io);

}  // namespace wsb
