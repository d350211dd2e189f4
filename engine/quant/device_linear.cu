// CUDA build of engine/quant/device_linear.hpp: argument checks and the kernels (shells around matvec_math.hpp).
#include <cuda_runtime.h>

#include <string>

#include "engine/quant/cuda_check.cuh"
#include "engine/quant/device_linear.hpp"
#include "engine/quant/matvec_math.hpp"

namespace wsb {

namespace quant {
namespace {

/// Butterfly over the warp (xor 16, 8, 4, 2, 1): lane i adds lane i^offset's value; float addition commutes, so
/// every lane ends with the same bits (tests emulate exactly this on the host).
__device__ __forceinline__ float warp_butterfly_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Expert of slot `slot`: ids[slot] (expert 0 without ids), -1 when outside [0, experts).
__device__ __forceinline__ int64_t slot_expert(const int32_t* ids, int slot, int64_t experts) {
  const int64_t e = ids != nullptr ? static_cast<int64_t>(ids[slot]) : 0;
  return (e < 0 || e >= experts) ? -1 : e;
}

/// Dense, Nvfp4 and Mxfp4: warp w of block (bx, slot) computes output row bx * kRowsPerBlock + w of that slot.
template <DeviceLinearFormat F>
__global__ void __launch_bounds__(kRowsPerBlock* kWarp)
    warp_row_kernel(DeviceLinear l, const int32_t* ids, const float* x, int64_t x_stride, float* y) {
  const int slot = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + static_cast<int64_t>(threadIdx.x) / kWarp;
  if (n >= l.rows) return;  // uniform over the warp, so the shuffles below see all 32 lanes
  float* out = y + static_cast<int64_t>(slot) * l.rows;
  const int64_t e = slot_expert(ids, slot, l.experts);
  if (e < 0) {
    if (lane == 0) out[n] = bad_expert_value();
    return;
  }
  const float* xs = x + static_cast<int64_t>(slot) * x_stride;
  float v;
  if constexpr (F == DeviceLinearFormat::Dense) {
    v = dense_lane_partial(l, e, n, lane, xs);
  } else if constexpr (F == DeviceLinearFormat::Nvfp4) {
    v = nvfp4_lane_partial(l, e, n, lane, xs, nvfp4_inv_input(l, e), nvfp4_word_path(l));
  } else {
    v = mxfp4_lane_partial(l, e, n, lane, xs, mxfp4_word_path(l));
  }
  v = warp_butterfly_sum(v);
  if (lane == 0) out[n] = F == DeviceLinearFormat::Nvfp4 ? v * l.alpha[e] : v;
}

/// Fp8Channel and DenseKMajor: thread (tx, s) of block (bx, slot) sums k-slice s of row bx * kFp8RowsPerBlock + tx;
/// the slices are added in order 0..kFp8Slices-1, then (Fp8) scaled by the channel scale.
template <DeviceLinearFormat F>
__global__ void __launch_bounds__(kFp8RowsPerBlock* kFp8Slices)
    kmajor_kernel(DeviceLinear l, const int32_t* ids, const float* x, int64_t x_stride, float* y) {
  __shared__ float partial[kFp8Slices][kFp8RowsPerBlock];
  const int slot = static_cast<int>(blockIdx.y);
  const int tx = static_cast<int>(threadIdx.x), s = static_cast<int>(threadIdx.y);
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kFp8RowsPerBlock + tx;
  float* out = y + static_cast<int64_t>(slot) * l.rows;
  const int64_t e = slot_expert(ids, slot, l.experts);  // uniform over the block
  if (e < 0) {
    if (s == 0 && n < l.rows) out[n] = bad_expert_value();
    return;
  }
  const float* xs = x + static_cast<int64_t>(slot) * x_stride;
  if constexpr (F == DeviceLinearFormat::Fp8Channel) {
    partial[s][tx] = n < l.rows ? fp8_slice_partial(l, e, n, s, xs) : 0.0f;
  } else {
    partial[s][tx] = n < l.rows ? dense_kmajor_slice_partial(l, e, n, s, xs) : 0.0f;
  }
  __syncthreads();
  if (s == 0 && n < l.rows) {
    float sum = partial[0][tx];
    for (int i = 1; i < kFp8Slices; ++i) sum += partial[i][tx];
    out[n] = F == DeviceLinearFormat::Fp8Channel ? sum * fp8_channel_scale(l, e, n) : sum;
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned(const void* p, uintptr_t to) { return (reinterpret_cast<uintptr_t>(p) % to) == 0; }

/// Host checks of a launch; throws Error(Mismatch) naming the field.
void validate(const DeviceLinear& l, int k, const float* x, int64_t x_stride, const float* y) {
  const std::string where = std::string("launch_linear_matvec (") + device_linear_format_name(l.format) + " " +
                            std::to_string(l.rows) + " x " + std::to_string(l.cols) + "): ";
  auto fail = [&](const std::string& why) { throw Error(ErrorKind::Mismatch, where + why); };
  if (k < 0 || k > 65535) fail("k = " + std::to_string(k) + " slots outside [0, 65535]");
  if (l.rows <= 0 || l.cols <= 0) fail("rows and cols must be positive");
  if (l.experts < 1) fail("experts = " + std::to_string(l.experts) + " (must be >= 1)");
  if (l.weight == nullptr) fail("weight pointer is null");
  if (x == nullptr || y == nullptr) fail("x or y pointer is null");
  if (x_stride != 0 && x_stride < l.cols)
    fail("x_stride " + std::to_string(x_stride) + " is neither 0 (shared input) nor >= cols");
  switch (l.format) {
    case DeviceLinearFormat::Dense:
    case DeviceLinearFormat::DenseKMajor:
      if (l.dense_dtype != DeviceDenseDtype::BF16 && l.dense_dtype != DeviceDenseDtype::F16 &&
          l.dense_dtype != DeviceDenseDtype::F32)
        fail("dense_dtype " + std::to_string(static_cast<int>(l.dense_dtype)) + " is not BF16, F16 or F32");
      if (!aligned(l.weight, dense_element_bytes(l.dense_dtype))) fail("weight pointer is not element-aligned");
      return;
    case DeviceLinearFormat::Fp8Channel:
      if (l.scale == nullptr || !aligned(l.scale, 4)) fail("scale pointer is null or not 4-byte aligned");
      if (l.weight_rows_padded < l.rows || l.weight_cols_padded < l.cols)
        fail("weight padded dims [Kp " + std::to_string(l.weight_cols_padded) + ", Np " +
             std::to_string(l.weight_rows_padded) + "] smaller than the logical ones");
      if (l.scale_rows_padded != l.weight_rows_padded)
        fail("scale_rows_padded " + std::to_string(l.scale_rows_padded) + " differs from the weight's Np " +
             std::to_string(l.weight_rows_padded));
      return;
    case DeviceLinearFormat::Nvfp4:
      if (l.scale == nullptr) fail("scale pointer is null");
      if (l.alpha == nullptr || l.input_scale == nullptr || !aligned(l.alpha, 4) || !aligned(l.input_scale, 4))
        fail("alpha or input_scale pointer is null or not 4-byte aligned");
      if (l.cols % 2 != 0) fail("cols must be even (two E2M1 codes per byte)");
      if (l.k_phase < 0 || l.k_phase >= kNvfp4BlockK) fail("k_phase " + std::to_string(l.k_phase) + " outside [0, 16)");
      if (l.scale_rows_padded < l.rows || l.scale_rows_padded % 128 != 0 ||
          l.scale_cols_padded < ceil_div(l.k_phase + l.cols, kNvfp4BlockK) || l.scale_cols_padded % 4 != 0)
        fail("scale padded dims [Mp " + std::to_string(l.scale_rows_padded) + ", Kp " +
             std::to_string(l.scale_cols_padded) + "] are not 128 x 4 tiles covering the blocks");
      return;
    case DeviceLinearFormat::Mxfp4:
      if (l.scale == nullptr) fail("scale pointer is null");
      if (l.weight_rows_padded < l.rows || l.weight_cols_padded < ceil_div(l.cols, kMxfp4BlockK))
        fail("weight padded dims [Np " + std::to_string(l.weight_rows_padded) + ", Kb " +
             std::to_string(l.weight_cols_padded) + "] smaller than the logical ones");
      if (l.scale_rows_padded < l.rows || l.scale_rows_padded % 256 != 0 ||
          l.scale_cols_padded < ceil_div(l.cols, kMxfp4BlockK) || l.scale_cols_padded % 2 != 0)
        fail("scale padded dims [Mp " + std::to_string(l.scale_rows_padded) + ", Kp " +
             std::to_string(l.scale_cols_padded) + "] do not fit the Hopper scale layout");
      return;
  }
  fail("unknown format " + std::to_string(static_cast<int>(l.format)));
}

}  // namespace
}  // namespace quant

void launch_linear_matvec(const DeviceLinear& l, const int32_t* expert_ids, int k, const float* x, int64_t x_stride,
                          float* y, cudaStream_t stream) {
  using namespace quant;
  if (k == 0) return;
  validate(l, k, x, x_stride, y);
  const unsigned slots = static_cast<unsigned>(k);
  switch (l.format) {
    case DeviceLinearFormat::Fp8Channel: {
      const dim3 grid(static_cast<unsigned>(ceil_div(l.rows, kFp8RowsPerBlock)), slots);
      kmajor_kernel<DeviceLinearFormat::Fp8Channel>
          <<<grid, dim3(kFp8RowsPerBlock, kFp8Slices), 0, stream>>>(l, expert_ids, x, x_stride, y);
      break;
    }
    case DeviceLinearFormat::DenseKMajor: {
      const dim3 grid(static_cast<unsigned>(ceil_div(l.rows, kFp8RowsPerBlock)), slots);
      kmajor_kernel<DeviceLinearFormat::DenseKMajor>
          <<<grid, dim3(kFp8RowsPerBlock, kFp8Slices), 0, stream>>>(l, expert_ids, x, x_stride, y);
      break;
    }
    case DeviceLinearFormat::Dense: {
      const dim3 grid(static_cast<unsigned>(ceil_div(l.rows, kRowsPerBlock)), slots);
      warp_row_kernel<DeviceLinearFormat::Dense><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(l, expert_ids, x, x_stride, y);
      break;
    }
    case DeviceLinearFormat::Nvfp4: {
      const dim3 grid(static_cast<unsigned>(ceil_div(l.rows, kRowsPerBlock)), slots);
      warp_row_kernel<DeviceLinearFormat::Nvfp4><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(l, expert_ids, x, x_stride, y);
      break;
    }
    case DeviceLinearFormat::Mxfp4: {
      const dim3 grid(static_cast<unsigned>(ceil_div(l.rows, kRowsPerBlock)), slots);
      warp_row_kernel<DeviceLinearFormat::Mxfp4><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(l, expert_ids, x, x_stride, y);
      break;
    }
  }
  check_cuda(cudaGetLastError(), std::string("launch_linear_matvec: ") + device_linear_format_name(l.format) +
                                     " kernel (" + std::to_string(l.rows) + " x " + std::to_string(l.cols) + ", " +
                                     std::to_string(k) + " slots)");
}

}  // namespace wsb
