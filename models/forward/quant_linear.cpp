#include "models/forward/quant_linear.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/errors.hpp"
#include "models/layout/moe_access.hpp"
#include "models/profile/moe_family.hpp"
#include "models/quant/codecs.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"

namespace wsb {

namespace {

[[noreturn]] void bad(const StorageRef& r, std::string_view why) {
  const RuntimeStorageSpec& s = *r.spec;
  throw Error(ErrorKind::Mismatch,
              fmt::format("reference forward: storage '{}' ({} {}, transform '{}'): {}", s.name, dtype_name(s.dtype),
                          shape_string(s.shape), s.transform, why));
}

void expect(const StorageRef& r, DType dtype, std::string_view transform) {
  if (r.spec == nullptr || r.data == nullptr)
    throw Error(ErrorKind::Mismatch, "reference forward: unbound storage reference");
  if (r.spec->dtype != dtype) bad(r, fmt::format("expected dtype {}", dtype_name(dtype)));
  if (r.spec->transform != transform) bad(r, fmt::format("expected transform '{}'", transform));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// A QuantLinear of `format` over the checked `weight` and `scale` (unbound for Dense), with its logical size.
QuantLinear linear_of(LinearFormat format, StorageRef weight, StorageRef scale, int64_t rows, int64_t cols,
                      int64_t experts) {
  QuantLinear l;
  l.format = format;
  l.weight = weight;
  l.scale = scale;
  l.rows = rows;
  l.cols = cols;
  l.experts = experts;
  return l;
}

float f32_at(const uint8_t* p, int64_t index) {
  float v;
  std::memcpy(&v, p + 4 * index, 4);
  return v;
}

/// Per-expert F32 [E] storage (NVFP4 alpha / input_scale).
void expect_per_expert(const StorageRef& r, int64_t experts) {
  if (r.spec == nullptr || r.data == nullptr)
    throw Error(ErrorKind::Mismatch, "reference forward: unbound storage reference");
  if (r.spec->dtype != DType::F32 || r.spec->shape != Shape{experts})
    bad(r, fmt::format("expected F32 [{}] (one scalar per expert)", experts));
}

const std::array<float, 16>& e2m1_values() {
  static const auto table = [] {
    std::array<float, 16> t{};
    for (uint8_t c = 0; c < 16; ++c) t[c] = e2m1_to_float(c);
    return t;
  }();
  return table;
}

void dense_matvec(const QuantLinear& l, int64_t e, const float* x, float* y) {
  const uint64_t matrix = static_cast<uint64_t>(l.rows * l.cols) * dtype_size(l.weight.spec->dtype);
  l.dense->matvec(l.weight.data + static_cast<uint64_t>(e) * matrix, l.rows, l.cols, x, y);
}

void dense_kmajor_matvec(const QuantLinear& l, int64_t e, const float* x, float* y) {
  const uint64_t matrix = static_cast<uint64_t>(l.rows * l.cols) * dtype_size(l.weight.spec->dtype);
  l.dense->matvec_kmajor(l.weight.data + static_cast<uint64_t>(e) * matrix, l.rows, l.cols, x, y);
}

void fp8_matvec(const QuantLinear& l, int64_t e, const float* x, float* y) {
  const std::array<float, 256>& e4m3 = e4m3_table();
  const RuntimeStorageSpec& ws = *l.weight.spec;
  std::fill(y, y + l.rows, 0.0f);
  // The runtime weight is K-major (N contiguous for each k): accumulate every row at once, each y[n] still
  // summing its k in order from 0.
  for (int64_t k = 0; k < l.cols; ++k) {
    const uint8_t* codes = l.weight.data + weight_element(ws, e, 0, k).byte;
    const float xk = x[k];
    for (int64_t n = 0; n < l.rows; ++n) y[n] += e4m3[codes[n]] * xk;
  }
  const uint8_t* scales = l.scale.data + scale_element(*l.scale.spec, e, 0, 0);
  for (int64_t n = 0; n < l.rows; ++n) y[n] *= f32_at(scales, n);
}

void nvfp4_matvec(const QuantLinear& l, int64_t e, const float* x, float* y, float* xs) {
  const std::array<float, 16>& e2m1 = e2m1_values();
  const std::array<float, 256>& e4m3 = e4m3_table();
  const RuntimeStorageSpec& ws = *l.weight.spec;
  const RuntimeStorageSpec& ss = *l.scale.spec;
  const float inv_input = 1.0f / f32_at(l.input_scale.data, e);
  const float alpha = f32_at(l.alpha.data, e);
  for (int64_t k = 0; k < l.cols; ++k) xs[k] = x[k] * inv_input;
  for (int64_t n = 0; n < l.rows; ++n) {
    const uint8_t* packed = l.weight.data + weight_element(ws, e, n, 0).byte;
    float acc = 0.0f;
    for (int64_t k = 0; k < l.cols;) {
      const int64_t first = k;
      const int64_t end = std::min(l.cols, ((l.k_phase + k) / kNvfp4Block + 1) * kNvfp4Block - l.k_phase);
      float part = 0.0f;
      for (; k < end; ++k) part += e2m1[(packed[k >> 1] >> ((k & 1) * 4)) & 0xF] * xs[k];
      acc += part * e4m3[l.scale.data[scale_element(ss, e, n, first, l.k_phase)]];
    }
    y[n] = acc * alpha;
  }
}

void mxfp4_matvec(const QuantLinear& l, int64_t e, const float* x, float* y) {
  const std::array<float, 16>& e2m1 = e2m1_values();
  const std::array<float, 256>& e8m0 = e8m0_table();
  const RuntimeStorageSpec& ws = *l.weight.spec;
  const RuntimeStorageSpec& ss = *l.scale.spec;
  for (int64_t n = 0; n < l.rows; ++n) {
    // mxfp4_value_offset keeps a row's blocks contiguous: element k sits in byte k/2 from the row start.
    const uint8_t* packed = l.weight.data + weight_element(ws, e, n, 0).byte;
    float acc = 0.0f;
    for (int64_t k = 0; k < l.cols;) {
      const int64_t first = k;
      const int64_t end = std::min(l.cols, k + kMxfp4Block);
      float part = 0.0f;
      for (; k < end; ++k) part += e2m1[(packed[k >> 1] >> ((k & 1) * 4)) & 0xF] * x[k];
      acc += part * e8m0[l.scale.data[scale_element(ss, e, n, first)]];
    }
    y[n] = acc;
  }
}

/// A BF16/F16/F32 weight of transform none whose 2-D shape (or trailing dims of a stacked [E, ..] one) is
/// [outer, inner]; `rows`/`cols` are the logical output/input sizes.
QuantLinear unquantized_linear(LinearFormat format, StorageRef weight, int64_t rows, int64_t cols, int64_t outer,
                               int64_t inner) {
  if (weight.spec == nullptr || weight.data == nullptr)
    throw Error(ErrorKind::Mismatch, "reference forward: unbound storage reference");
  const DType dt = weight.spec->dtype;
  if (dt != DType::BF16 && dt != DType::F16 && dt != DType::F32)
    bad(weight, "expected a BF16, F16 or F32 weight");
  expect(weight, dt, kTransformNone);
  const Shape& s = weight.spec->shape;
  const bool stacked = s.size() == 3 && s[1] == outer && s[2] == inner;
  if (!stacked && s != Shape{outer, inner})
    bad(weight, fmt::format("expected [{}, {}] or [E, {}, {}]", outer, inner, outer, inner));
  const int64_t experts = stacked ? s[0] : 1;
  QuantLinear l = linear_of(format, weight, StorageRef{}, rows, cols, experts);
  l.dense = &weight_kernels(dt);
  return l;
}

}  // namespace

QuantLinear dense_linear(StorageRef weight, int64_t rows, int64_t cols) {
  return unquantized_linear(LinearFormat::Dense, weight, rows, cols, rows, cols);
}

QuantLinear dense_kmajor_linear(StorageRef weight, int64_t rows, int64_t cols) {
  return unquantized_linear(LinearFormat::DenseKMajor, weight, rows, cols, cols, rows);
}

QuantLinear fp8_linear(StorageRef weight, StorageRef scale, int64_t rows, int64_t cols) {
  expect(weight, DType::F8_E4M3, kFp8ChannelWeight);
  expect(scale, DType::F32, kFp8ChannelScale);
  const Shape& w = weight.spec->shape;
  const Shape& s = scale.spec->shape;
  if (w.size() != 2 && w.size() != 3) bad(weight, "expected [Kp, Np] or [E, Kp, Np]");
  const size_t r = w.size();
  const int64_t experts = r == 3 ? w[0] : 1;
  if (w[r - 2] < cols || w[r - 1] < rows)
    bad(weight, fmt::format("cannot hold {} output rows x {} input columns", rows, cols));
  const Shape want_scale = r == 3 ? Shape{experts, w[2]} : Shape{w[1]};
  if (s != want_scale) bad(scale, fmt::format("expected {} to match weight '{}'", shape_string(want_scale),
                                              weight.spec->name));
  return linear_of(LinearFormat::Fp8Channel, weight, scale, rows, cols, experts);
}

QuantLinear nvfp4_linear(StorageRef weight, StorageRef scale, StorageRef alpha, StorageRef input_scale, int64_t rows,
                         int64_t cols, int64_t k_phase) {
  expect(weight, DType::U8, kTransformNone);
  expect(scale, DType::F8_E4M3, kNvfp4ScaleSwizzle);
  const Shape& w = weight.spec->shape;
  const Shape& s = scale.spec->shape;
  if (cols % 2 != 0 || w.size() != 3 || w[1] != rows || w[2] * 2 != cols)
    bad(weight, fmt::format("expected U8 [E, {}, {}] (two E2M1 codes per byte)", rows, cols / 2));
  const int64_t experts = w[0];
  if (s.size() != 3 || s[0] != experts || s[1] < rows || s[2] < ceil_div(k_phase + cols, kNvfp4Block))
    bad(scale, fmt::format("cannot hold the block scales of {} x {} (K phase {}) for {} experts", rows, cols, k_phase,
                           experts));
  expect_per_expert(alpha, experts);
  expect_per_expert(input_scale, experts);
  QuantLinear l = linear_of(LinearFormat::Nvfp4, weight, scale, rows, cols, experts);
  l.alpha = alpha;
  l.input_scale = input_scale;
  l.k_phase = k_phase;
  return l;
}

QuantLinear mxfp4_linear(StorageRef weight, StorageRef scale, int64_t rows, int64_t cols) {
  expect(weight, DType::U8, kMxfp4Pad);
  expect(scale, DType::U8, kMxfp4ScaleSwizzle);
  const Shape& w = weight.spec->shape;
  const Shape& s = scale.spec->shape;
  const int64_t blocks = ceil_div(cols, kMxfp4Block);
  if (w.size() != 4 || w[3] != 16 || w[1] < rows || w[2] < blocks)
    bad(weight, fmt::format("expected U8 [E, >= {}, >= {}, 16]", rows, blocks));
  const int64_t experts = w[0];
  if (s.size() != 3 || s[0] != experts || s[1] * 32 < rows || s[2] % 32 != 0 || s[2] / 32 < blocks)
    bad(scale, fmt::format("cannot hold the swizzled scales of {} rows x {} blocks for {} experts", rows, blocks,
                           experts));
  return linear_of(LinearFormat::Mxfp4, weight, scale, rows, cols, experts);
}

StorageRef require_storage(StorageRef r, DType dtype, const Shape& shape) {
  if (r.spec == nullptr || r.data == nullptr)
    throw Error(ErrorKind::Mismatch, "reference forward: unbound storage reference");
  if (r.spec->dtype != dtype || r.spec->shape != shape)
    bad(r, fmt::format("expected {} {}", dtype_name(dtype), shape_string(shape)));
  return r;
}

void read_f32(const StorageRef& r, int64_t n, float* out) {
  if (r.spec == nullptr || r.data == nullptr)
    throw Error(ErrorKind::Mismatch, "reference forward: unbound storage reference");
  if (r.spec->dtype != DType::F32 || r.spec->shape != Shape{n}) bad(r, fmt::format("expected F32 [{}]", n));
  std::memcpy(out, r.data, static_cast<size_t>(n) * 4);
}

void linear_matvec(const QuantLinear& l, int64_t expert, const float* x, float* y, float* scratch) {
  if (expert < 0 || expert >= l.experts)
    bad(l.weight, fmt::format("expert {} outside [0, {})", expert, l.experts));
  switch (l.format) {
    case LinearFormat::Dense:
      return dense_matvec(l, expert, x, y);
    case LinearFormat::DenseKMajor:
      return dense_kmajor_matvec(l, expert, x, y);
    case LinearFormat::Fp8Channel:
      return fp8_matvec(l, expert, x, y);
    case LinearFormat::Nvfp4:
      return nvfp4_matvec(l, expert, x, y, scratch);
    case LinearFormat::Mxfp4:
      return mxfp4_matvec(l, expert, x, y);
  }
}

}  // namespace wsb
