#pragma once
// Test cases of the device matvec (engine/quant/device_linear.hpp): runtime storages built from random gathered
// tensors by the real host transforms (models/transform), the logical weight dequantized from the gathered tensors
// with models/quant/codecs (independent of the runtime layout), and the host emulation of the kernels on the
// functions of engine/quant/matvec_math.hpp (lane partials + the xor butterfly, FP8 slices added in order).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/quant/device_linear.hpp"
#include "engine/quant/matvec_math.hpp"
#include "core/numeric.hpp"
#include "models/quant/codecs.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform.hpp"

namespace wsb::test {

/// One linear layer: its runtime bytes (host), a DeviceLinear over them (host pointers), and the logical weight.
struct LinearCase {
  std::string what;
  DeviceLinear linear;  ///< pointers into the vectors below
  std::vector<uint8_t> weight, scale;
  std::vector<float> alpha, input_scale;
  std::vector<double> value;  ///< logical dequantized W, [experts, rows, cols] row-major (NVFP4: without alpha/input)
  LinearCase() = default;
  LinearCase(const LinearCase&) = delete;  // `linear` points into this object
  LinearCase& operator=(const LinearCase&) = delete;

  double w(int64_t e, int64_t n, int64_t k) const {
    return value[static_cast<size_t>((e * linear.rows + n) * linear.cols + k)];
  }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/// Runs host transform `name` from gathered [dims] to runtime [dims]; returns the runtime bytes. The output starts
/// dirty (0xEE) so a transform that skipped a byte would show.
inline std::vector<uint8_t> run_transform(std::string_view name, DType dtype, const Shape& gathered_shape,
                                          const std::vector<uint8_t>& gathered, const Shape& runtime_shape) {
  std::vector<uint8_t> out(shape_numel(runtime_shape) * dtype_size(dtype), 0xEE);
  TransformIo io;
  io.storage = "test";
  io.dtype = dtype;
  io.gathered_shape = gathered_shape;
  io.gathered = gathered;
  io.runtime_shape = runtime_shape;
  io.out = out;
  apply_transform(name, io);
  return out;
}

/// A random E4M3 code that is not NaN (0x7F / 0xFF): NaN payloads of device arithmetic differ from the host's.
inline uint8_t random_e4m3(std::mt19937& rng) {
  for (;;) {
    const auto c = static_cast<uint8_t>(rng());
    if ((c & 0x7F) != 0x7F) return c;
  }
}

inline float uniform(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

inline void set_common(LinearCase& c, DeviceLinearFormat f, int64_t experts, int64_t rows, int64_t cols) {
  c.linear = DeviceLinear{};
  c.linear.format = f;
  c.linear.rows = rows;
  c.linear.cols = cols;
  c.linear.experts = experts;
  c.linear.weight_rows_padded = rows;
  c.linear.weight_cols_padded = cols;
  c.value.assign(static_cast<size_t>(experts * rows * cols), 0.0);
}

/// Dense [E, rows, cols] of `dtype`; codes with bounded exponents (no Inf/NaN, no overflow in the sums).
inline void make_dense(LinearCase& c, DeviceDenseDtype dtype, int64_t experts, int64_t rows, int64_t cols,
                       uint32_t seed) {
  set_common(c, DeviceLinearFormat::Dense, experts, rows, cols);
  c.linear.dense_dtype = dtype;
  std::mt19937 rng(seed);
  const int64_t n = experts * rows * cols;
  const int64_t esize = dtype == DeviceDenseDtype::F32 ? 4 : 2;
  c.weight.assign(static_cast<size_t>(n * esize), 0);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = c.weight.data() + i * esize;
    if (dtype == DeviceDenseDtype::F32) {
      const float v = uniform(rng, -2.0f, 2.0f);
      std::memcpy(p, &v, 4);
      c.value[static_cast<size_t>(i)] = v;
    } else {
      uint16_t code;
      if (dtype == DeviceDenseDtype::BF16) {  // sign | exponent 118..130 | 7 mantissa bits
        code = static_cast<uint16_t>(((rng() & 1u) << 15) | ((118u + rng() % 13u) << 7) | (rng() & 0x7Fu));
        c.value[static_cast<size_t>(i)] = bf16_to_float(code);
      } else {  // F16: sign | exponent 0..20 (subnormals included) | 10 mantissa bits
        code = static_cast<uint16_t>(((rng() & 1u) << 15) | ((rng() % 21u) << 10) | (rng() & 0x3FFu));
        c.value[static_cast<size_t>(i)] = f16_to_float(code);
      }
      std::memcpy(p, &code, 2);
    }
  }
  c.linear.weight = c.weight.data();
  c.what = std::string("dense ") + (dtype == DeviceDenseDtype::BF16 ? "bf16" : dtype == DeviceDenseDtype::F16 ? "f16" : "f32");
}

/// DenseKMajor: the codes of make_dense laid out [E, cols, rows] (outputs contiguous, gpt_oss BF16 experts).
inline void make_dense_kmajor(LinearCase& c, DeviceDenseDtype dtype, int64_t experts, int64_t rows, int64_t cols,
                              uint32_t seed) {
  make_dense(c, dtype, experts, rows, cols, seed);
  const size_t esize = dtype == DeviceDenseDtype::F32 ? 4 : 2;
  std::vector<uint8_t> kmajor(c.weight.size());
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k)
        std::memcpy(&kmajor[static_cast<size_t>((e * cols + k) * rows + n) * esize],
                    &c.weight[static_cast<size_t>((e * rows + n) * cols + k) * esize], esize);
  c.weight = std::move(kmajor);
  c.linear.format = DeviceLinearFormat::DenseKMajor;
  c.linear.weight = c.weight.data();
  c.what = "dense_kmajor " + c.what.substr(6);
}

/// FP8 per-channel: gathered E4M3 [E, rows, cols] and F32 scale [E, rows, 1] through fp8_channel_weight/scale.
inline void make_fp8(LinearCase& c, int64_t experts, int64_t rows, int64_t cols, uint32_t seed) {
  set_common(c, DeviceLinearFormat::Fp8Channel, experts, rows, cols);
  std::mt19937 rng(seed);
  std::vector<uint8_t> gw(static_cast<size_t>(experts * rows * cols));
  for (auto& b : gw) b = random_e4m3(rng);
  std::vector<uint8_t> gs(static_cast<size_t>(experts * rows) * 4);
  std::vector<float> scale_of(static_cast<size_t>(experts * rows));
  for (size_t i = 0; i < scale_of.size(); ++i) {
    scale_of[i] = uniform(rng, 0.25f, 2.0f);
    std::memcpy(gs.data() + 4 * i, &scale_of[i], 4);
  }
  const Shape wg = {experts, rows, cols}, sg = {experts, rows, 1};
  const Shape wr = fp8_channel_weight_shape(wg), sr = fp8_channel_scale_shape(sg);
  c.weight = run_transform(kFp8ChannelWeight, DType::F8_E4M3, wg, gw, wr);
  c.scale = run_transform(kFp8ChannelScale, DType::F32, sg, gs, sr);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const size_t i = static_cast<size_t>((e * rows + n) * cols + k);
        c.value[i] = static_cast<double>(e4m3_to_float(gw[i])) * scale_of[static_cast<size_t>(e * rows + n)];
      }
  c.linear.weight = c.weight.data();
  c.linear.scale = c.scale.data();
  c.linear.weight_cols_padded = wr[1];  // Kp
  c.linear.weight_rows_padded = wr[2];  // Np
  c.linear.scale_rows_padded = sr[1];
  c.what = "fp8_channel";
}

/// NVFP4: packed U8 [E, rows, cols/2] (transform none), gathered E4M3 scales [E, rows, K16] through the 128x4
/// swizzle (K16 counts 16-blocks from k_phase), per-expert alpha and input_scale.
inline void make_nvfp4(LinearCase& c, int64_t experts, int64_t rows, int64_t cols, int64_t k_phase, uint32_t seed) {
  set_common(c, DeviceLinearFormat::Nvfp4, experts, rows, cols);
  std::mt19937 rng(seed);
  c.weight.resize(static_cast<size_t>(experts * rows * cols / 2));
  for (auto& b : c.weight) b = static_cast<uint8_t>(rng());
  const int64_t k16 = ceil_div(k_phase + cols, 16);
  std::vector<uint8_t> gs(static_cast<size_t>(experts * rows * k16));
  for (auto& b : gs) b = random_e4m3(rng);
  const Shape sg = {experts, rows, k16}, sr = nvfp4_scale_swizzled_shape(sg);
  c.scale = run_transform(kNvfp4ScaleSwizzle, DType::F8_E4M3, sg, gs, sr);
  c.alpha.resize(static_cast<size_t>(experts));
  c.input_scale.resize(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) {
    c.alpha[static_cast<size_t>(e)] = uniform(rng, 0.5f, 2.0f);
    c.input_scale[static_cast<size_t>(e)] = uniform(rng, 0.5f, 2.0f);
  }
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const uint64_t element = static_cast<uint64_t>((e * rows + n) * cols + k);
        const double s = e4m3_to_float(gs[static_cast<size_t>((e * rows + n) * k16 + (k + k_phase) / 16)]);
        c.value[static_cast<size_t>(element)] = static_cast<double>(e2m1_to_float(e2m1_packed_at(c.weight.data(), element))) * s;
      }
  c.linear.weight = c.weight.data();
  c.linear.scale = c.scale.data();
  c.linear.alpha = c.alpha.data();
  c.linear.input_scale = c.input_scale.data();
  c.linear.k_phase = k_phase;
  c.linear.scale_rows_padded = sr[1];
  c.linear.scale_cols_padded = sr[2];
  c.what = "nvfp4 (k_phase " + std::to_string(k_phase) + ")";
}

/// MXFP4: gathered values [E, rows, Kb, 16] padded by mxfp4_pad to [E, Np, Kb, 16]; gathered E8M0 scales
/// [E, rows, Kb] (codes 120..134) through the Hopper swizzle.
inline void make_mxfp4(LinearCase& c, int64_t experts, int64_t rows, int64_t cols, uint32_t seed) {
  set_common(c, DeviceLinearFormat::Mxfp4, experts, rows, cols);
  std::mt19937 rng(seed);
  const int64_t kb = ceil_div(cols, 32), np = round_up(rows, 32);
  std::vector<uint8_t> gw(static_cast<size_t>(experts * rows * kb * 16));
  for (auto& b : gw) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> gs(static_cast<size_t>(experts * rows * kb));
  for (auto& b : gs) b = static_cast<uint8_t>(120 + rng() % 15);
  const Shape wg = {experts, rows, kb, 16}, wr = {experts, np, kb, 16};
  const Shape sg = {experts, rows, kb}, sr = mxfp4_scale_swizzled_shape(experts, rows, kb);
  c.weight = run_transform(kMxfp4Pad, DType::U8, wg, gw, wr);
  c.scale = run_transform(kMxfp4ScaleSwizzle, DType::U8, sg, gs, sr);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t* row = gw.data() + (e * rows + n) * kb * 16;
        const double s = e8m0_to_float(gs[static_cast<size_t>((e * rows + n) * kb + k / 32)]);
        c.value[static_cast<size_t>((e * rows + n) * cols + k)] =
            static_cast<double>(e2m1_to_float(e2m1_packed_at(row, static_cast<uint64_t>(k)))) * s;
      }
  c.linear.weight = c.weight.data();
  c.linear.scale = c.scale.data();
  c.linear.weight_rows_padded = np;
  c.linear.weight_cols_padded = kb;
  c.linear.scale_rows_padded = sr[1] * 32;
  c.linear.scale_cols_padded = sr[2] / 32;
  c.what = "mxfp4";
}

/// Which block-read path the kernel takes, decided on the DEVICE pointers (alignment): the emulation must follow.
struct WordPaths {
  bool nvfp4 = false;
  bool mxfp4 = false;
};
inline WordPaths word_paths_of(const DeviceLinear& l) { return {quant::nvfp4_word_path(l), quant::mxfp4_word_path(l)}; }

/// Host emulation of launch_linear_matvec over host pointers: k slots, slot j on expert ids[j] (expert 0 when ids
/// is null; NaN rows when out of range), input x + j * x_stride, output y[j * rows + n].
inline std::vector<float> emulate_matvec(const DeviceLinear& l, const int32_t* ids, int k, const float* x,
                                         int64_t x_stride, WordPaths paths) {
  using namespace quant;
  std::vector<float> y(static_cast<size_t>(k * l.rows));
  for (int slot = 0; slot < k; ++slot) {
    const int64_t e = ids != nullptr ? ids[slot] : 0;
    float* out = y.data() + slot * l.rows;
    if (e < 0 || e >= l.experts) {
      for (int64_t n = 0; n < l.rows; ++n) out[n] = bad_expert_value();
      continue;
    }
    const float* xs = x + slot * x_stride;
    for (int64_t n = 0; n < l.rows; ++n) {
      if (l.format == DeviceLinearFormat::Fp8Channel || l.format == DeviceLinearFormat::DenseKMajor) {
        const bool fp8 = l.format == DeviceLinearFormat::Fp8Channel;
        float partial[kFp8Slices];
        for (int s = 0; s < kFp8Slices; ++s)
          partial[s] = fp8 ? fp8_slice_partial(l, e, n, s, xs) : dense_kmajor_slice_partial(l, e, n, s, xs);
        float sum = partial[0];
        for (int s = 1; s < kFp8Slices; ++s) sum += partial[s];
        out[n] = fp8 ? sum * fp8_channel_scale(l, e, n) : sum;
        continue;
      }
      float lane[kWarp];
      for (int i = 0; i < kWarp; ++i) {
        if (l.format == DeviceLinearFormat::Dense) {
          lane[i] = dense_lane_partial(l, e, n, i, xs);
        } else if (l.format == DeviceLinearFormat::Nvfp4) {
          lane[i] = nvfp4_lane_partial(l, e, n, i, xs, nvfp4_inv_input(l, e), paths.nvfp4);
        } else {
          lane[i] = mxfp4_lane_partial(l, e, n, i, xs, paths.mxfp4);
        }
      }
      for (int offset = kWarp / 2; offset > 0; offset >>= 1) {  // v += shfl_xor(v, offset), every lane at once
        float next[kWarp];
        for (int i = 0; i < kWarp; ++i) next[i] = lane[i] + lane[i ^ offset];
        std::memcpy(lane, next, sizeof lane);
      }
      out[n] = l.format == DeviceLinearFormat::Nvfp4 ? lane[0] * l.alpha[e] : lane[0];
    }
  }
  return y;
}

/// The exact product in double: y[n] = sum_k W[e][n][k] x[k] (NVFP4: alpha * sum W * (x / input_scale)), and the
/// sum of |terms| for a tolerance.
inline void reference_matvec(const LinearCase& c, int64_t e, const float* x, std::vector<double>* y,
                             std::vector<double>* magnitude) {
  const DeviceLinear& l = c.linear;
  y->assign(static_cast<size_t>(l.rows), 0.0);
  magnitude->assign(static_cast<size_t>(l.rows), 0.0);
  const bool nv = l.format == DeviceLinearFormat::Nvfp4;
  const double pre = nv ? 1.0 / c.input_scale[static_cast<size_t>(e)] : 1.0;
  const double post = nv ? c.alpha[static_cast<size_t>(e)] : 1.0;
  for (int64_t n = 0; n < l.rows; ++n) {
    double acc = 0, mag = 0;
    for (int64_t k = 0; k < l.cols; ++k) {
      const double t = c.w(e, n, k) * x[k] * pre * post;
      acc += t;
      mag += std::abs(t);
    }
    (*y)[static_cast<size_t>(n)] = acc;
    (*magnitude)[static_cast<size_t>(n)] = mag;
  }
}

}  // namespace wsb::test
