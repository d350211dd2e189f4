#pragma once
// Deterministic float32 kernels of the device forward (the CUDA twins of models/forward/dense_ops.hpp and
// weight_kernels.hpp), C++17-clean so the .cu files and the C++20 glue share it. A family's decode step is a
// sequence of these launches on one stream per TP rank (see engine/kernels/tp_slot.hpp for the rank-ordered
// reduction around them).
//
// Conventions shared by every launcher:
// - All pointers are device pointers on the current device; `stream` belongs to that device. Nothing allocates,
//   nothing synchronizes, so every launcher may be recorded into a CUDA graph.
// - Weights are the runtime storages' raw bytes, row-major, element type `WeightType`, widened exactly to float32
//   (BF16 = upper half of binary32, F16 via __half2float). Storage addresses must be at least element aligned
//   (DeviceStorages gives 64 B); 16 B-aligned rows whose length is a multiple of 16 B take the vector path.
// - Every sum runs in a fixed order that depends only on the shapes: each lane (thread) sums its strided share in
//   index order, lanes combine through a __shfl_down_sync tree, warps through a sequential sum by one thread.
//   No atomics, so results are bitwise reproducible and independent of other work on the device.
// - Token and position are read from device memory (`token`, `position`: one int32 each), so a captured graph
//   serves every step. The host checks them before uploading (token in [0, vocab), position < cache rows).
// - Failures to launch throw Error(Io) "launching kernel <name>: <cuda error>".
#include <cuda_runtime.h>

#include <cstdint>

namespace wsb::dk {

/// Element type of stored weights.
enum class WeightType : int { BF16 = 0, F16 = 1, F32 = 2 };

/// Bytes per element of `type`.
inline int weight_type_size(WeightType type) { return type == WeightType::F32 ? 4 : 2; }

/// Vocab-parallel embedding: out[i] = float(table[*token - row_start][i]) for i < hidden when this rank's table
/// (rows [row_start, row_start + rows) of the vocabulary, row-major [rows, hidden]) owns the token, else 0.0f.
/// Summing the ranks' outputs gives the token's row exactly (x + 0.0f == x).
void embedding_rows(const uint8_t* table, WeightType type, int64_t row_start, int64_t rows, int64_t hidden,
                    const int32_t* token, float* out, cudaStream_t stream);

/// out[i] = w[i] * (x[i] * (1 / sqrtf(mean(x^2) + eps))) over n floats (dense_ops.hpp rms_norm; eps already
/// rounded to float32). One block of 256 threads; out may alias x.
void rms_norm(const float* x, const uint8_t* w, WeightType type, int64_t n, float eps, float* out,
              cudaStream_t stream);

/// y[r] = sum_c float(W[r][c]) * x[c] for r < rows, W row-major [rows, cols]: one warp per row (8 rows per block),
/// lanes stride over columns (16 B vector loads when aligned), float32 accumulation. y must not alias x.
void matvec(const uint8_t* w, WeightType type, int64_t rows, int64_t cols, const float* x, float* y,
            cudaStream_t stream);

/// RoPE, rotate_half convention over the first `rotary_dim` elements of each of `heads` consecutive head_dim-wide
/// vectors of x (in place): angle_j = inv_freq[j] * float(*position), element j pairs with j + rotary_dim/2:
/// a' = a*cos - b*sin, b' = b*cos + a*sin (dense_ops.hpp apply_rope / moe_ops.hpp apply_partial_rope).
/// inv_freq has rotary_dim/2 floats (models/forward/rope_yarn.hpp rope_frequencies, computed on the host); cos and
/// sin are multiplied by `cos_sin_scale` (the YaRN attention scaling; 1 for plain RoPE) as transformers does.
void rope(float* x, int heads, int head_dim, int rotary_dim, const float* inv_freq, const int32_t* position,
          float cos_sin_scale, cudaStream_t stream);

/// Appends one position to a KV cache: k_cache[*position * width + i] = k[i], v_cache likewise, i < width.
/// Caches are position-major [max_positions, width].
void store_kv(const float* k, const float* v, int64_t width, const int32_t* position, float* k_cache,
              float* v_cache, cudaStream_t stream);

/// Decode attention of every local q head over its cached keys/values (GQA), float32, fixed order
/// (dense_ops.hpp attend_head; moe_ops.hpp attend_head_window for window and sinks).
struct DecodeAttention {
  const float* q = nullptr;        ///< [q_heads, qk_dim]
  const float* k_cache = nullptr;  ///< key of local kv head j at position t: k_cache + t * k_stride + j * qk_dim
  const float* v_cache = nullptr;  ///< value likewise: v_cache + t * v_stride + j * v_dim
  int64_t k_stride = 0;            ///< floats between cached positions
  int64_t v_stride = 0;
  int q_heads = 0;        ///< local q heads (one block each)
  int qk_dim = 0;
  int v_dim = 0;          ///< <= 1024
  int q_head_start = 0;   ///< global index of local q head 0
  int group = 1;          ///< heads / kv_heads: global q head g reads global kv head g / group
  int kv_head_start = 0;  ///< global index of local kv head 0
  int64_t window = 0;     ///< 0: keys [0, position]; else keys (position - window, position]
  const uint8_t* sinks = nullptr;  ///< optional per-local-q-head sink logit (stored weights), nullptr = none
  WeightType sinks_type = WeightType::BF16;
  float scale = 1.0f;     ///< applied to q.k (head_dim^-0.5)
  const int32_t* position = nullptr;  ///< device scalar: current position (its key/value already stored)
  float* scores = nullptr;            ///< scratch [q_heads, scores_stride]
  int64_t scores_stride = 0;          ///< >= number of attended positions (max_positions)
  float* out = nullptr;               ///< [q_heads, v_dim]
};
/// scores_t = (q . k_t) * scale, softmax with max subtraction (a sink joins the max and, last, the denominator),
/// out[d] = sum_t (e_t / denom) * v_t[d] in t order. One block of 256 threads per q head.
void decode_attention(const DecodeAttention& a, cudaStream_t stream);

/// out[j] = gate[j] / (1 + expf(-gate[j])) * up[j] for j < n (dense_ops.hpp swiglu). out may alias gate or up.
void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

/// x[i] += y[i] for i < n.
void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream);

/// Most partial sums reduce_ranks takes (the TP degree).
inline constexpr int kMaxReduceParts = 64;

/// Rank-ordered reduction: s = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ..., then out[i] = s
/// (accumulate false) or out[i] += s (accumulate true: the residual add after the reduction). `parts` is a host
/// array of `count` device pointers (1 <= count <= kMaxReduceParts, passed by value to the kernel, so a captured
/// graph keeps them); all on the current device. out must not alias a part.
void reduce_ranks(float* out, const float* const* parts, int count, int64_t n, bool accumulate,
                  cudaStream_t stream);

}  // namespace wsb::dk
