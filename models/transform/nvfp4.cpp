#include "models/transform/nvfp4.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "models/transform/transform_util.hpp"

namespace wsb {

namespace {

float f32_at(std::span<const uint8_t> bytes, int64_t index) {
  float v;
  std::memcpy(&v, bytes.data() + index * 4, 4);
  return v;
}

void put_f32(std::span<uint8_t> bytes, int64_t index, float v) { std::memcpy(bytes.data() + index * 4, &v, 4); }

/// Checks a per-expert scalar transform's shapes: gathered F32 [E, width], runtime F32 [E].
int64_t expect_scalars(const TransformIo& io, std::string_view name, int64_t width) {
  expect_io(io, name, DType::F32, 2, 1);
  if (io.gathered_shape[1] != width || io.runtime_shape[0] != io.gathered_shape[0])
    transform_mismatch(io, name,
                       fmt::format("gathered {} / runtime {} must be [E, {}] / [E]", shape_string(io.gathered_shape),
                                   shape_string(io.runtime_shape), width));
  if (io.sources.size() != static_cast<size_t>(io.gathered_shape[0] * width))
    transform_mismatch(
        io, name,
        fmt::format("{} source names for {} gathered scalars", io.sources.size(), io.gathered_shape[0] * width));
  return io.gathered_shape[0];
}

/// w13 runs as one GEMM over [up; gate] with one global scale: gate's and up's weight_scale_2 must be identical.
void check_same_scale_2(const TransformIo& io, std::string_view name, int64_t gate_index, int64_t up_index) {
  const float gate = f32_at(io.gathered, gate_index), up = f32_at(io.gathered, up_index);
  if (std::memcmp(&gate, &up, 4) != 0)
    transform_mismatch(
        io, name,
        fmt::format("weight_scale_2 of '{}' ({}) differs from '{}' ({}); the fused w13 GEMM needs one",
                    io.sources[static_cast<size_t>(gate_index)], gate, io.sources[static_cast<size_t>(up_index)], up));
}

}  // namespace

Shape nvfp4_scale_swizzled_shape(const Shape& g) {
  if (g.size() != 3) return {};
  return {g[0], round_up(g[1], kNvfp4TileRows), round_up(g[2], kNvfp4TileCols)};
}

uint64_t nvfp4_scale_offset(const Shape& runtime, int64_t expert, int64_t m, int64_t k16) {
  const int64_t mp = runtime[1], kp = runtime[2];
  const int64_t mt = m / 128, r4 = (m % 128) / 32, r32 = m % 32;
  const int64_t kt = k16 / 4, k4 = k16 % 4;
  return static_cast<uint64_t>(expert * mp * kp + mt * 128 * kp + kt * 512 + r32 * 16 + r4 * 4 + k4);
}

uint64_t nvfp4_weight_offset(const Shape& weight_shape, int64_t expert, int64_t n, int64_t k) {
  const int64_t rows = weight_shape[1], row_bytes = weight_shape[2];
  return static_cast<uint64_t>((expert * rows + n) * row_bytes + k / 2);
}

void nvfp4_scale_swizzle_transform(const TransformIo& io) {
  expect_io(io, kNvfp4ScaleSwizzle, DType::F8_E4M3, 3, 3);
  const Shape want = nvfp4_scale_swizzled_shape(io.gathered_shape);
  if (io.runtime_shape != want)
    transform_mismatch(
        io, kNvfp4ScaleSwizzle,
        fmt::format("runtime {} is not {} (gathered {} padded to 128 x 4 tiles)", shape_string(io.runtime_shape),
                    shape_string(want), shape_string(io.gathered_shape)));
  const int64_t experts = io.gathered_shape[0], m = io.gathered_shape[1], k = io.gathered_shape[2];
  if (want[1] != m || want[2] != k) std::memset(io.out.data(), 0, io.out.size());
  // The offset separates into a row part and a column part (see nvfp4.hpp), so a row's columns need no division.
  std::vector<int64_t> col_part(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c)
    col_part[static_cast<size_t>(c)] = static_cast<int64_t>(nvfp4_scale_offset(want, 0, 0, c));
  const uint8_t* src = io.gathered.data();
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < m; ++r) {
      uint8_t* row = io.out.data() + nvfp4_scale_offset(want, e, r, 0);
      for (int64_t c = 0; c < k; ++c) row[col_part[static_cast<size_t>(c)]] = *src++;
    }
}

void nvfp4_w13_scale_2_transform(const TransformIo& io) {
  const int64_t experts = expect_scalars(io, kNvfp4W13Scale2, 2);
  for (int64_t e = 0; e < experts; ++e) {
    check_same_scale_2(io, kNvfp4W13Scale2, 2 * e, 2 * e + 1);
    put_f32(io.out, e, f32_at(io.gathered, 2 * e));
  }
}

void nvfp4_w13_input_scale_transform(const TransformIo& io) {
  const int64_t experts = expect_scalars(io, kNvfp4W13InputScale, 2);
  for (int64_t e = 0; e < experts; ++e)
    put_f32(io.out, e, std::max(f32_at(io.gathered, 2 * e), f32_at(io.gathered, 2 * e + 1)));
}

void nvfp4_w13_alpha_transform(const TransformIo& io) {
  const int64_t experts = expect_scalars(io, kNvfp4W13Alpha, 4);
  for (int64_t e = 0; e < experts; ++e) {
    check_same_scale_2(io, kNvfp4W13Alpha, 4 * e + 2, 4 * e + 3);
    const float input = std::max(f32_at(io.gathered, 4 * e), f32_at(io.gathered, 4 * e + 1));
    put_f32(io.out, e, input * f32_at(io.gathered, 4 * e + 2));
  }
}

void nvfp4_w2_alpha_transform(const TransformIo& io) {
  const int64_t experts = expect_scalars(io, kNvfp4W2Alpha, 2);
  for (int64_t e = 0; e < experts; ++e) put_f32(io.out, e, f32_at(io.gathered, 2 * e) * f32_at(io.gathered, 2 * e + 1));
}

}  // namespace wsb
