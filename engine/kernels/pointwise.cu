// Element-wise kernels of the device forward: embedding gather, RoPE, KV append, SiLU-mul, residual add and the
// rank-ordered reduction of TP partial sums.
#include <cstdint>
#include <string>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/kernel_common.cuh"
#include "core/errors.hpp"

namespace wsb::dk {
namespace {

using detail::kPointwiseThreads;
using detail::pointwise_blocks;

template <class Codes>
__global__ void embedding_kernel(const uint8_t* __restrict__ table, int64_t row_start, int64_t rows, int64_t hidden,
                                 const int32_t* __restrict__ token, float* __restrict__ out) {
  const int64_t local = static_cast<int64_t>(*token) - row_start;
  const bool owned = local >= 0 && local < rows;
  const uint8_t* row = table + (owned ? local : 0) * hidden * Codes::kSize;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < hidden;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = owned ? Codes::at(row, i) : 0.0f;
}

__global__ void rope_kernel(float* x, int head_dim, int rotary_dim, const float* __restrict__ inv_freq,
                            const int32_t* __restrict__ position, float cos_sin_scale) {
  const int half = rotary_dim / 2;
  float* v = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  const float pos = static_cast<float>(*position);
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    const float angle = inv_freq[j] * pos;
    const float c = __fmul_rn(cosf(angle), cos_sin_scale), s = __fmul_rn(sinf(angle), cos_sin_scale);
    const float a = v[j], b = v[j + half];
    v[j] = a * c - b * s;
    v[j + half] = b * c + a * s;
  }
}

__global__ void store_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, int64_t width,
                                const int32_t* __restrict__ position, float* __restrict__ k_cache,
                                float* __restrict__ v_cache) {
  const int64_t base = static_cast<int64_t>(*position) * width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    k_cache[base + i] = k[i];
    v_cache[base + i] = v[i];
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[j];
    out[j] = g / (1.0f + expf(-g)) * up[j];
  }
}

__global__ void add_kernel(float* x, const float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

struct Parts {
  const float* p[kMaxReduceParts];
};

__global__ void reduce_ranks_kernel(float* out, Parts parts, int count, int64_t n, bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = parts.p[0][i];
    for (int r = 1; r < count; ++r) s += parts.p[r][i];
    out[i] = accumulate ? out[i] + s : s;
  }
}

}  // namespace

void embedding_rows(const uint8_t* table, WeightType type, int64_t row_start, int64_t rows, int64_t hidden,
                    const int32_t* token, float* out, cudaStream_t stream) {
  detail::with_codes(type, [&](auto codes) {
    embedding_kernel<decltype(codes)>
        <<<pointwise_blocks(hidden), kPointwiseThreads, 0, stream>>>(table, row_start, rows, hidden, token, out);
  });
  check_launch("embedding_rows");
}

void rope(float* x, int heads, int head_dim, int rotary_dim, const float* inv_freq, const int32_t* position,
          float cos_sin_scale, cudaStream_t stream) {
  if (heads <= 0 || rotary_dim < 2) return;
  const int half = rotary_dim / 2;
  const int threads = half < 32 ? 32 : (half > kPointwiseThreads ? kPointwiseThreads : half);
  rope_kernel<<<heads, threads, 0, stream>>>(x, head_dim, rotary_dim, inv_freq, position, cos_sin_scale);
  check_launch("rope");
}

void store_kv(const float* k, const float* v, int64_t width, const int32_t* position, float* k_cache,
              float* v_cache, cudaStream_t stream) {
  store_kv_kernel<<<pointwise_blocks(width), kPointwiseThreads, 0, stream>>>(k, v, width, position, k_cache, v_cache);
  check_launch("store_kv");
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  silu_mul_kernel<<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(gate, up, n, out);
  check_launch("silu_mul");
}

void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  add_kernel<<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(x, y, n);
  check_launch("add_inplace");
}

void reduce_ranks(float* out, const float* const* parts, int count, int64_t n, bool accumulate,
                  cudaStream_t stream) {
  if (count < 1 || count > kMaxReduceParts)
    throw Error(ErrorKind::Mismatch, "reduce_ranks: " + std::to_string(count) + " partial sums, supported 1.." +
                                         std::to_string(kMaxReduceParts));
  Parts p{};
  for (int r = 0; r < count; ++r) p.p[r] = parts[r];
  reduce_ranks_kernel<<<pointwise_blocks(n), kPointwiseThreads, 0, stream>>>(out, p, count, n, accumulate);
  check_launch("reduce_ranks");
}

}  // namespace wsb::dk
