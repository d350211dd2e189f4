#pragma once
// Element accessors over runtime storages, for forward passes that read the runtime layout (after sharding and
// the post-load transform). They dispatch on the storage's transform and shape, so one call site serves BF16,
// FP8-channel, NVFP4 and MXFP4 storages alike. Indices are rank-local and logical (before padding); there is no
// bounds check beyond what the formulas need -- callers pass n < N, k < K of the logical weight.
#include <cstdint>

#include "models/layout/tp_layout.hpp"

namespace wsb {

/// Where one logical element lives: `nibble` is -1 for whole-byte elements (dtype_size bytes at `byte`), 0 for the
/// low and 1 for the high nibble of a packed E2M1 byte.
struct ElementPos {
  uint64_t byte = 0;
  int nibble = -1;
  bool operator==(const ElementPos&) const = default;
};

/// Weight element (expert, n, k): n = output row in the storage's own row order (e.g. w13 NVFP4 [up; gate], gpt_oss
/// interleaved gate/up), k = input column. Supported storages:
///   transform none, [N, K] or [E, N, K], non-U8 -> row-major (expert ignored for 2-D);
///   transform none, U8 [E, N, K/2] (NVFP4 weights)  -> nvfp4_weight_offset, nibble k % 2;
///   fp8_channel_weight [Kp, Np] / [E, Kp, Np]        -> fp8_channel_weight_offset;
///   mxfp4_pad U8 [E, Np, Kb, 16] (MXFP4 values)      -> mxfp4_value_offset, nibble k % 2.
/// Throws Error(Format) naming the storage for any other storage.
ElementPos weight_element(const RuntimeStorageSpec& weight, int64_t expert, int64_t n, int64_t k);

/// Byte offset of the scale that applies to weight element (expert, n, k):
///   fp8_channel_scale [Np] / [E, Np]  -> F32 at fp8_channel_scale_offset(expert, n);
///   nvfp4_scale_swizzle               -> E4M3 at nvfp4_scale_offset(expert, n, (k_phase + k) / 16), where
///                                        k_phase = rank-local K start % 16 (nonzero only for a w2 shard whose
///                                        first block straddles ranks, see nvfp4_w2_scale_columns);
///   mxfp4_scale_swizzle               -> E8M0 at mxfp4_scale_offset(expert, n, k / 32).
/// Throws Error(Format) naming the storage for any other storage.
uint64_t scale_element(const RuntimeStorageSpec& scale, int64_t expert, int64_t n, int64_t k, int64_t k_phase = 0);

}  // namespace wsb
