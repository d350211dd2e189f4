// deepseek_v3 MLA kernels of the device forward (moe_kernels.hpp): interleaved RoPE and the naive expansion of the
// latent key/value into per-head caches.
#include <cstdint>
#include <string>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/moe_kernels.hpp"
#include "core/errors.hpp"

namespace wsb::dk {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxRopeDim = 2048;

/// One block per vector: the whole vector is read into shared memory before any element is written, because the
/// de-interleaved output position i takes input elements 2i and 2i + 1.
__global__ void __launch_bounds__(kThreads) rope_interleaved_kernel(float* x, int64_t stride, int dim,
                                                                    const float* __restrict__ inv_freq,
                                                                    const int32_t* __restrict__ position,
                                                                    float cos_sin_scale) {
  __shared__ float in[kMaxRopeDim];
  float* v = x + static_cast<int64_t>(blockIdx.x) * stride;
  for (int i = threadIdx.x; i < dim; i += kThreads) in[i] = v[i];
  __syncthreads();
  const int half = dim / 2;
  const float pos = static_cast<float>(*position);
  for (int i = threadIdx.x; i < half; i += kThreads) {
    // dense_ops.cpp rope_angles (float product, then cos/sin) and apply_rope on the de-interleaved pair.
    const float angle = __fmul_rn(inv_freq[i], pos);
    const float c = __fmul_rn(cosf(angle), cos_sin_scale), s = __fmul_rn(sinf(angle), cos_sin_scale);
    const float a = in[2 * i], b = in[2 * i + 1];
    v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

/// Block h writes head h's expanded key and value.
__global__ void __launch_bounds__(kThreads) mla_store_kv_kernel(const float* __restrict__ kv,
                                                                const float* __restrict__ k_rope, int nope, int rope,
                                                                int v_dim, const int32_t* __restrict__ position,
                                                                float* __restrict__ k_cache,
                                                                float* __restrict__ v_cache) {
  const int h = blockIdx.x, heads = gridDim.x, qk = nope + rope;
  const int64_t pos = *position;
  const float* head = kv + static_cast<int64_t>(h) * (nope + v_dim);
  float* key = k_cache + (pos * heads + h) * qk;
  float* value = v_cache + (pos * heads + h) * v_dim;
  for (int i = threadIdx.x; i < qk; i += kThreads) key[i] = i < nope ? head[i] : k_rope[i - nope];
  for (int i = threadIdx.x; i < v_dim; i += kThreads) value[i] = head[nope + i];
}

}  // namespace

void rope_interleaved(float* x, int vectors, int64_t stride, int dim, const float* inv_freq, const int32_t* position,
                      float cos_sin_scale, cudaStream_t stream) {
  if (vectors <= 0 || dim <= 0) return;
  if (dim % 2 != 0 || dim > kMaxRopeDim)
    throw Error(ErrorKind::Mismatch, "rope_interleaved: dim " + std::to_string(dim) + " must be even and <= " +
                                         std::to_string(kMaxRopeDim));
  rope_interleaved_kernel<<<vectors, kThreads, 0, stream>>>(x, stride, dim, inv_freq, position, cos_sin_scale);
  check_launch("rope_interleaved");
}

void mla_store_kv(const float* kv, const float* k_rope, int heads, int nope, int rope, int v_dim,
                  const int32_t* position, float* k_cache, float* v_cache, cudaStream_t stream) {
  if (heads <= 0) return;
  mla_store_kv_kernel<<<heads, kThreads, 0, stream>>>(kv, k_rope, nope, rope, v_dim, position, k_cache, v_cache);
  check_launch("mla_store_kv");
}

}  // namespace wsb::dk
