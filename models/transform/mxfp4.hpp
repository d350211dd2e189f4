#pragma once
// MXFP4 (gpt-oss experts) post-load transforms for Hopper, after the layout vLLM/SGLang use with triton_kernels'
// matmul_ogs: the intermediate dim of each rank is padded to whole 32-element blocks, values keep a K-major
// layout, and the E8M0 scales are swizzled into triton_kernels' HopperMXScaleLayout (num_warps = 8).
//
// Values (transform kMxfp4Pad): runtime U8 [E, Np, Kb, 16] (Kb = K/32 blocks of 16 bytes), K-major: element
// (e, n, k) is the E2M1 code in byte ((e*Np + n)*Kb + k/32)*16 + (k%32)/2, low nibble for even k
// (mxfp4_value_offset) -- the canonical gpt-oss block layout with the padded dim grown. Chosen over triton's
// mma-v3 value swizzle, which changes between triton_kernels versions; the forward reads it directly.
// Biases (kMxfp4Pad, BF16 [E, Np]) and any other zero-padded tensor use the same transform.
//
// Scales (transform kMxfp4ScaleSwizzle): gathered U8 [E, M, K] (M = weight rows, K = blocks along the reduction
// dim) -> runtime U8 [E, Mp/32, Kp*32], Mp = round_up(M_runtime, 256), Kp = round_up(K_runtime, 2), where the
// runtime's logical (M_runtime, K_runtime) may exceed the gathered (M, K) by the intermediate padding. With
//   m = 256*a + 128*b + 16*c + 8*d + e   (b, d in 0..1; c, e in 0..7),   k = 2*f + g   (g in 0..1)
// the logical [E, Mp, Kp] scale matrix, viewed as [Mp/256, 2, 8, 2, 8, Kp/2, 2] = (a, b, c, d, e, f, g) and
// permuted to (a, c, f, b, e, g, d), is stored contiguously:
//   byte(x, m, k) = x*Mp*Kp + ((((((a*8 + c)*(Kp/2) + f)*2 + b)*8 + e)*2 + g)*2 + d)
// (triton_kernels tensor_details/layout_details/hopper_scale.py, swizzle_data: reshape(M//256, 2, 8, 2, 8, K//2,
// 2), permute [0, 2, 5, 1, 4, 6, 3]). Padding entries are 0x00 (2^-127, multiplying zero values only).
// Value of element (e, n, k) = e2m1(code) * 2^(scale(e, n, k/32) - 127).
#include <cstdint>

#include "models/transform/transform.hpp"

namespace wsb {

inline constexpr std::string_view kMxfp4Pad = "mxfp4_pad";
inline constexpr std::string_view kMxfp4ScaleSwizzle = "mxfp4_scale_swizzle";
inline constexpr int64_t kMxfp4ScaleAlignM = 256;  ///< 2 * num_warps(8) * 2 * 8 (hopper_scale.py)
inline constexpr int64_t kMxfp4ScaleAlignK = 2;

/// Runtime shape of a swizzled scale with `experts` x logical [m, k]: [experts, round_up(m,256)/32,
/// round_up(k,2)*32].
Shape mxfp4_scale_swizzled_shape(int64_t experts, int64_t m, int64_t k);
/// Byte offset of scale (expert, m, kb) in a swizzled runtime scale of shape [E, Mp/32, Kp*32] (formula above).
uint64_t mxfp4_scale_offset(const Shape& runtime, int64_t expert, int64_t m, int64_t kb);
/// Byte offset of the packed byte holding element (expert, n, k) in a value tensor of shape [E, Np, Kb, 16];
/// low nibble for even k.
uint64_t mxfp4_value_offset(const Shape& value_shape, int64_t expert, int64_t n, int64_t k);

/// Transform kMxfp4Pad: any dtype; runtime has the rank of gathered and every dim >= gathered's. Element i of the
/// gathered tensor lands at the same multi-index of the runtime tensor; every other runtime element is zero.
/// Throws Error(Mismatch) naming the storage otherwise.
void mxfp4_pad_transform(const TransformIo& io);
/// Transform kMxfp4ScaleSwizzle: dtype U8; gathered [E, M, K], runtime [E, Mp/32, Kp*32] with Mp % 256 == 0,
/// Mp >= M, Kp % 2 == 0, Kp >= K; else Error(Mismatch) naming the storage.
void mxfp4_scale_swizzle_transform(const TransformIo& io);

}  // namespace wsb
