#pragma once
// FP8 per-output-channel (compressed-tensors "channel" strategy) post-load transform: host path only.
//
// Canonical: weight F8_E4M3 [N, K] (N = output features, K = input features), weight_scale F32 [N, 1].
// Runtime (what SGLang/vLLM's CUTLASS/cuBLASLt FP8 GEMMs read: the weight transposed so it is the column-major
// B operand, out = x[., K] @ W^T):
//   weight  F8_E4M3 [Kp, Np] or, for stacked experts, [E, Kp, Np]; element (e, n, k) at byte
//           (e * Kp + k) * Np + n (N contiguous, "K-major rows of N"). Kp = round_up(K, 16), Np = round_up(N, 16);
//           padding bytes are 0x00 (E4M3 +0.0), so padded rows/columns contribute nothing.
//   scale   F32 [Np] or [E, Np]; element (e, n) at float index e * Np + n; padding 0.0f.
//   value(e, n, k) = e4m3(weight byte) * scale(e, n).
// Why 16: FP8 tensor-core GEMMs need every leading dimension to be a multiple of 16 bytes (cuBLASLt FP8
// requirements; torch._scaled_mm asserts dims divisible by 16), and per-rank shards such as GLM-4.5-Air's dense
// intermediate 10944 / 8 = 1368 are not. Padding to the same multiple on both dims keeps one rule for all shards.
#include <cstdint>

#include "models/transform/transform.hpp"

namespace wsb {

inline constexpr std::string_view kFp8ChannelWeight = "fp8_channel_weight";
inline constexpr std::string_view kFp8ChannelScale = "fp8_channel_scale";
inline constexpr int64_t kFp8ChannelPad = 16;

/// Runtime shape of a gathered weight [N, K] -> [Kp, Np], [E, N, K] -> [E, Kp, Np]. Other ranks: returned empty.
Shape fp8_channel_weight_shape(const Shape& gathered);
/// Runtime shape of a gathered scale [N, 1] -> [Np], [E, N, 1] -> [E, Np]. Other ranks: returned empty.
Shape fp8_channel_scale_shape(const Shape& gathered);
/// Byte offset of logical weight element (expert, n, k) in a runtime weight of shape `runtime` ([Kp, Np] takes
/// expert 0). No bounds check beyond the runtime shape (callers pass logical n < N, k < K).
uint64_t fp8_channel_weight_offset(const Shape& runtime, int64_t expert, int64_t n, int64_t k);
/// Byte offset of the F32 scale of (expert, n) in a runtime scale of shape `runtime` ([Np] takes expert 0).
uint64_t fp8_channel_scale_offset(const Shape& runtime, int64_t expert, int64_t n);

/// Transform kFp8ChannelWeight: dtype F8_E4M3, gathered [N, K] / [E, N, K], runtime fp8_channel_weight_shape.
/// Throws Error(Mismatch) naming the storage on any other dtype or shape.
void fp8_channel_weight_transform(const TransformIo& io);
/// Transform kFp8ChannelScale: dtype F32, gathered [N, 1] / [E, N, 1], runtime fp8_channel_scale_shape.
void fp8_channel_scale_transform(const TransformIo& io);

/// One band of kFp8ChannelWeight: gathered rows [n0, n1) of expert `expert` (0 for a 2-D weight), read in place
/// (`rows[i]` points at the K bytes of row n0 + i, e.g. straight into the canonical tensors: no gather), written
/// as output columns [n0, n1) of every output row of that expert, zero padding rows K..Kp included; the band with
/// n1 == N also zeroes the padding columns N..Np of every row. The bands of a partition of [0, N) of every expert
/// together write exactly fp8_channel_weight_transform's output, so they can run on different threads. `out` is
/// the whole runtime tensor. Throws Error(Mismatch) naming `storage` for shapes fp8_channel_weight_transform
/// refuses, a band outside [0, N) or an expert outside [0, E), rows.size() != n1 - n0, or an out of the wrong size.
void fp8_channel_weight_band(std::string_view storage, const Shape& gathered, const Shape& runtime, int64_t expert,
                             int64_t n0, int64_t n1, std::span<const uint8_t* const> rows, std::span<uint8_t> out);

/// Output rows [k0, k1) of expert `expert` (0 for a 2-D weight) of kFp8ChannelWeight: the runtime bytes
/// [(expert * Kp + k0) * Np, (expert * Kp + k1) * Np), which are contiguous, written into `out` ((k1 - k0) * Np
/// bytes), read in place from `rows` (`rows[i]` points at the K bytes of gathered row i of that expert, i in
/// [0, N)); padding rows K..Kp and padding columns N..Np are zero. Regular (cached) stores: the piece is meant to be
/// read back at once (device-delta's recorder compares it with the live bytes), so callers keep it within a core's
/// L2; 64 rows at a time use each canonical cache line whole. Row bands that partition [0, Kp) of every expert
/// together give exactly fp8_channel_weight_transform's output. Throws Error(Mismatch) naming `storage` for shapes
/// fp8_channel_weight_transform refuses, an expert outside [0, E), a band outside [0, Kp), rows.size() != N, or an
/// out of the wrong size.
void fp8_channel_weight_rows(std::string_view storage, const Shape& gathered, const Shape& runtime, int64_t expert,
                             int64_t k0, int64_t k1, std::span<const uint8_t* const> rows, std::span<uint8_t> out);

}  // namespace wsb
