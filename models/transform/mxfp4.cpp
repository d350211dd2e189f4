#include "models/transform/mxfp4.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "models/transform/transform_util.hpp"

namespace wsb {

Shape mxfp4_scale_swizzled_shape(int64_t experts, int64_t m, int64_t k) {
  return {experts, round_up(m, kMxfp4ScaleAlignM) / 32, round_up(k, kMxfp4ScaleAlignK) * 32};
}

uint64_t mxfp4_scale_offset(const Shape& runtime, int64_t expert, int64_t m, int64_t kb) {
  const int64_t mp = runtime[1] * 32, kp = runtime[2] / 32;
  const int64_t a = m / 256, b = (m / 128) % 2, c = (m / 16) % 8, d = (m / 8) % 2, e = m % 8;
  const int64_t f = kb / 2, g = kb % 2;
  const int64_t within = (((((a * 8 + c) * (kp / 2) + f) * 2 + b) * 8 + e) * 2 + g) * 2 + d;
  return static_cast<uint64_t>(expert * mp * kp + within);
}

uint64_t mxfp4_value_offset(const Shape& value_shape, int64_t expert, int64_t n, int64_t k) {
  const int64_t rows = value_shape[1], kb = value_shape[2];
  return static_cast<uint64_t>(((expert * rows + n) * kb + k / 32) * 16 + (k % 32) / 2);
}

void mxfp4_pad_transform(const TransformIo& io) {
  const Shape& g = io.gathered_shape;
  const Shape& r = io.runtime_shape;
  bool fits = g.size() == r.size() && !g.empty();
  for (size_t i = 0; fits && i < g.size(); ++i) fits = g[i] <= r[i];
  if (!fits)
    transform_mismatch(io, kMxfp4Pad,
                       fmt::format("runtime {} does not contain gathered {} (same rank, every dim >=)", shape_string(r),
                                   shape_string(g)));
  if (g == r) {
    std::memcpy(io.out.data(), io.gathered.data(), io.out.size());
    return;
  }
  std::memset(io.out.data(), 0, io.out.size());
  if (shape_numel(g) == 0) return;
  // Copy one innermost run (the gathered last dim) per gathered outer index, walking the outer multi-index.
  const size_t esize = dtype_size(io.dtype), rank = g.size();
  const size_t run = static_cast<size_t>(g.back()) * esize;
  std::vector<int64_t> idx(rank, 0);
  const uint8_t* src = io.gathered.data();
  while (true) {
    uint64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) offset = offset * static_cast<uint64_t>(r[i]) + static_cast<uint64_t>(idx[i]);
    std::memcpy(io.out.data() + offset * esize, src, run);
    src += run;
    // Advance the outer multi-index (dims 0..rank-2), the innermost outer dim fastest; done after the last.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < g[d]) break;
      idx[d] = 0;
    }
  }
}

void mxfp4_scale_swizzle_transform(const TransformIo& io) {
  expect_io(io, kMxfp4ScaleSwizzle, DType::U8, 3, 3);
  const Shape& g = io.gathered_shape;
  const Shape& r = io.runtime_shape;
  const int64_t mp = r[1] * 32, kp = r[2] % 32 == 0 ? r[2] / 32 : -1;
  if (r[0] != g[0] || mp % kMxfp4ScaleAlignM != 0 || mp < g[1] || kp < 0 || kp % kMxfp4ScaleAlignK != 0 || kp < g[2])
    transform_mismatch(io, kMxfp4ScaleSwizzle,
                       fmt::format("runtime {} cannot hold gathered {} swizzled (need [E, Mp/32, Kp*32], Mp % 256 == 0,"
                                   " Kp % 2 == 0)",
                                   shape_string(r), shape_string(g)));
  std::memset(io.out.data(), 0, io.out.size());  // scales are small next to the values: always rewrite padding
  // The permuted offset is a sum of a row part (a, b, c, d, e) and a column part (f, g): rows need no division.
  std::vector<int64_t> col_part(static_cast<size_t>(g[2]));
  for (int64_t k = 0; k < g[2]; ++k)
    col_part[static_cast<size_t>(k)] = static_cast<int64_t>(mxfp4_scale_offset(r, 0, 0, k));
  const uint8_t* src = io.gathered.data();
  for (int64_t e = 0; e < g[0]; ++e)
    for (int64_t m = 0; m < g[1]; ++m) {
      uint8_t* row = io.out.data() + mxfp4_scale_offset(r, e, m, 0);
      for (int64_t k = 0; k < g[2]; ++k) row[col_part[static_cast<size_t>(k)]] = *src++;
    }
}

}  // namespace wsb
