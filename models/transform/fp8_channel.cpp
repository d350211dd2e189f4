#include "models/transform/fp8_channel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "models/transform/transform_util.hpp"

namespace wsb {

namespace {

/// Transposes tiles of this many rows/columns at a time so reads and writes both stay within a few cache lines.
constexpr int64_t kTile = 64;

static_assert(std::endian::native == std::endian::little, "transpose8 reads rows as little-endian words");

/// Transposes the 8x8 byte block whose rows start at row[0..7] + col into dst (row stride `dst_stride`) with three
/// rounds of masked swaps on 64-bit rows (1-, 2-, then 4-byte sub-blocks; Hacker's Delight, transpose8), about
/// ten times faster than byte-by-byte strided copies.
void transpose8(const uint8_t* const* row, int64_t col, uint8_t* dst, int64_t dst_stride) {
  uint64_t r[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&r[i], row[i] + col, 8);
  for (int i = 0; i < 8; i += 2) {
    const uint64_t t = ((r[i] >> 8) ^ r[i + 1]) & 0x00FF00FF00FF00FFull;
    r[i + 1] ^= t;
    r[i] ^= t << 8;
  }
  for (int i : {0, 1, 4, 5}) {
    const uint64_t t = ((r[i] >> 16) ^ r[i + 2]) & 0x0000FFFF0000FFFFull;
    r[i + 2] ^= t;
    r[i] ^= t << 16;
  }
  for (int i = 0; i < 4; ++i) {
    const uint64_t t = ((r[i] >> 32) ^ r[i + 4]) & 0x00000000FFFFFFFFull;
    r[i + 4] ^= t;
    r[i] ^= t << 32;
  }
  for (int i = 0; i < 8; ++i) std::memcpy(dst + i * dst_stride, &r[i], 8);
}

/// dst[kk][nn] = row[nn - base][kk] for nn in [n0, n1),
/// kk in [k0, k1): whole 8x8 blocks via transpose8, edges bytewise. dst points at output row 0, column 0 of the
/// expert; np is the output row stride.
void transpose_rect8(const uint8_t* const* row, int64_t base, uint8_t* dst, int64_t np, int64_t n0, int64_t n1,
                     int64_t k0, int64_t k1) {
  const int64_t n8 = n0 + (n1 - n0) / 8 * 8, k8 = k0 + (k1 - k0) / 8 * 8;
  for (int64_t nn = n0; nn < n8; nn += 8)
    for (int64_t kk = k0; kk < k8; kk += 8) transpose8(row + (nn - base), kk, dst + kk * np + nn, np);
  for (int64_t kk = k0; kk < k1; ++kk)
    for (int64_t nn = (kk < k8 ? n8 : n0); nn < n1; ++nn) dst[kk * np + nn] = row[nn - base][kk];
}

#if defined(__SSE2__)
/// The 16x16 byte block whose rows start at row[0..15] + col, transposed into dst (row stride `dst_stride`) with
/// four rounds of SSE2 unpacks (8-, 16-, 32-, then 64-bit interleaves): a 16-byte load or store per row and 64
/// register operations per 256 bytes, where transpose8 spends about 40 scalar operations per 64 bytes.
void transpose16(const uint8_t* const* row, int64_t col, uint8_t* dst, int64_t dst_stride) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[i] + col));
  // b[i], b[8 + i]: columns 0-7 / 8-15 of rows 2i, 2i + 1, two bytes per column.
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[8 + i] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  // a[4g + i]: columns 4g .. 4g + 3 of rows 4i .. 4i + 3, four bytes per column.
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      a[8 * h + i] = _mm_unpacklo_epi16(b[8 * h + 2 * i], b[8 * h + 2 * i + 1]);
      a[8 * h + 4 + i] = _mm_unpackhi_epi16(b[8 * h + 2 * i], b[8 * h + 2 * i + 1]);
    }
  }
  // b[4g + 2c + p]: columns 4g + 2c and 4g + 2c + 1 of rows 8p .. 8p + 7, eight bytes per column.
  for (int g = 0; g < 4; ++g) {
    for (int p = 0; p < 2; ++p) {
      b[4 * g + p] = _mm_unpacklo_epi32(a[4 * g + 2 * p], a[4 * g + 2 * p + 1]);
      b[4 * g + 2 + p] = _mm_unpackhi_epi32(a[4 * g + 2 * p], a[4 * g + 2 * p + 1]);
    }
  }
  // Column j = 4g + 2c + d: the two row halves of its pair, joined.
  for (int g = 0; g < 4; ++g) {
    for (int c = 0; c < 2; ++c) {
      const __m128i lo = b[4 * g + 2 * c], hi = b[4 * g + 2 * c + 1];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (4 * g + 2 * c) * dst_stride), _mm_unpacklo_epi64(lo, hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (4 * g + 2 * c + 1) * dst_stride),
                       _mm_unpackhi_epi64(lo, hi));
    }
  }
}
#endif

/// transpose_rect8's contract; with SSE2, whole 16x16 blocks first and the two edge strips by transpose_rect8.
void transpose_tile(const uint8_t* const* row, int64_t base, uint8_t* dst, int64_t np, int64_t n0, int64_t n1,
                    int64_t k0, int64_t k1) {
#if defined(__SSE2__)
  const int64_t n16 = n0 + (n1 - n0) / 16 * 16, k16 = k0 + (k1 - k0) / 16 * 16;
  for (int64_t nn = n0; nn < n16; nn += 16)
    for (int64_t kk = k0; kk < k16; kk += 16) transpose16(row + (nn - base), kk, dst + kk * np + nn, np);
  transpose_rect8(row, base, dst, np, n0, n16, k16, k1);
  transpose_rect8(row, base, dst, np, n16, n1, k0, k1);
#else
  transpose_rect8(row, base, dst, np, n0, n1, k0, k1);
#endif
}

/// transpose_tile's contract for a whole-width tile (n1 - n0 == kTile) whose output rows start on cache lines:
/// transposed into an L1 buffer first, then each output row's 64 bytes stored with non-temporal stores, so the
/// runtime storage is written in whole lines without reading them first (a regular store would read every line
/// of the output before writing it: a third more memory traffic than the copy floor). Other tiles:
/// transpose_tile. The caller ends its writes with an sfence (stream_fence).
void transpose_tile_streamed(const uint8_t* const* row, int64_t base, uint8_t* dst, int64_t np, int64_t n0,
                             int64_t n1, int64_t k0, int64_t k1) {
#if defined(__SSE2__)
  uint8_t* const origin = dst + k0 * np + n0;
  if (n1 - n0 == kTile && np % 64 == 0 && reinterpret_cast<uintptr_t>(origin) % 64 == 0) {
    const uint8_t* shifted[kTile];
    for (int64_t i = 0; i < kTile; ++i) shifted[i] = row[n0 - base + i] + k0;
    alignas(64) uint8_t tile[kTile * kTile];
    transpose_tile(shifted, 0, tile, kTile, 0, kTile, 0, k1 - k0);
    for (int64_t kk = 0; kk < k1 - k0; ++kk) {
      auto* out = reinterpret_cast<__m128i*>(origin + kk * np);
      const auto* in = reinterpret_cast<const __m128i*>(tile + kk * kTile);
      for (int q = 0; q < 4; ++q) _mm_stream_si128(out + q, _mm_load_si128(in + q));
    }
    return;
  }
#endif
  transpose_tile(row, base, dst, np, n0, n1, k0, k1);
}

/// Orders the streamed stores of transpose_tile_streamed before whatever this thread does next.
void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/// The shape checks of fp8_channel_weight_transform; returns the runtime shape.
Shape check_weight_shapes(const TransformIo& io) {
  const size_t rank = io.gathered_shape.size();
  if (rank != 2 && rank != 3)
    transform_mismatch(io, kFp8ChannelWeight,
                       fmt::format("gathered {} is neither [N, K] nor [E, N, K]", shape_string(io.gathered_shape)));
  expect_io(io, kFp8ChannelWeight, DType::F8_E4M3, rank, rank);
  const Shape want = fp8_channel_weight_shape(io.gathered_shape);
  if (io.runtime_shape != want)
    transform_mismatch(
        io, kFp8ChannelWeight,
        fmt::format("runtime {} is not {} (gathered {} transposed, padded to {})", shape_string(io.runtime_shape),
                    shape_string(want), shape_string(io.gathered_shape), kFp8ChannelPad));
  return want;
}

/// The band's work once checked: see fp8_channel_weight_band.
void weight_band(const Shape& gathered, const Shape& runtime, int64_t expert, int64_t n0, int64_t n1,
                 const uint8_t* const* rows, uint8_t* out) {
  const size_t rank = gathered.size();
  const int64_t n = gathered[rank - 2], k = gathered[rank - 1];
  const int64_t kp = runtime[rank - 2], np = runtime[rank - 1];
  uint8_t* dst = out + expert * kp * np;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile)
    for (int64_t k0 = 0; k0 < k; k0 += kTile)
      transpose_tile_streamed(rows, n0, dst, np, t0, std::min(n1, t0 + kTile), k0, std::min(k, k0 + kTile));
  stream_fence();
  for (int64_t kk = k; kk < kp; ++kk) std::memset(dst + kk * np + n0, 0, static_cast<size_t>(n1 - n0));
  if (n1 == n && np > n) {
    for (int64_t kk = 0; kk < kp; ++kk) std::memset(dst + kk * np + n, 0, static_cast<size_t>(np - n));
  }
}

}  // namespace

Shape fp8_channel_weight_shape(const Shape& g) {
  if (g.size() == 2) return {round_up(g[1], kFp8ChannelPad), round_up(g[0], kFp8ChannelPad)};
  if (g.size() == 3) return {g[0], round_up(g[2], kFp8ChannelPad), round_up(g[1], kFp8ChannelPad)};
  return {};
}

Shape fp8_channel_scale_shape(const Shape& g) {
  if (g.size() == 2 && g[1] == 1) return {round_up(g[0], kFp8ChannelPad)};
  if (g.size() == 3 && g[2] == 1) return {g[0], round_up(g[1], kFp8ChannelPad)};
  return {};
}

uint64_t fp8_channel_weight_offset(const Shape& runtime, int64_t expert, int64_t n, int64_t k) {
  const size_t r = runtime.size();
  const int64_t kp = runtime[r - 2], np = runtime[r - 1];
  return static_cast<uint64_t>((expert * kp + k) * np + n);
}

uint64_t fp8_channel_scale_offset(const Shape& runtime, int64_t expert, int64_t n) {
  const int64_t np = runtime.back();
  return static_cast<uint64_t>(expert * np + n) * sizeof(float);
}

void fp8_channel_weight_transform(const TransformIo& io) {
  const Shape runtime = check_weight_shapes(io);
  const size_t rank = io.gathered_shape.size();
  const int64_t experts = rank == 3 ? io.gathered_shape[0] : 1;
  const int64_t n = io.gathered_shape[rank - 2], k = io.gathered_shape[rank - 1];
  std::vector<const uint8_t*> rows(static_cast<size_t>(n));
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r = 0; r < n; ++r) rows[static_cast<size_t>(r)] = io.gathered.data() + (e * n + r) * k;
    weight_band(io.gathered_shape, runtime, e, 0, n, rows.data(), io.out.data());
  }
}

namespace {

/// The TransformIo of a band or row-band call (no data), its shapes checked as fp8_channel_weight_transform does.
TransformIo checked_weight_io(std::string_view storage, const Shape& gathered, const Shape& runtime) {
  TransformIo io;
  io.storage = storage;
  io.dtype = DType::F8_E4M3;
  io.gathered_shape = gathered;
  io.runtime_shape = runtime;
  check_weight_shapes(io);
  return io;
}

}  // namespace

void fp8_channel_weight_band(std::string_view storage, const Shape& gathered, const Shape& runtime, int64_t expert,
                             int64_t n0, int64_t n1, std::span<const uint8_t* const> rows, std::span<uint8_t> out) {
  const TransformIo io = checked_weight_io(storage, gathered, runtime);
  const size_t rank = gathered.size();
  const int64_t experts = rank == 3 ? gathered[0] : 1;
  const int64_t n = gathered[rank - 2];
  if (out.size() != shape_numel(runtime))
    transform_mismatch(io, kFp8ChannelWeight,
                       fmt::format("output of {} bytes for runtime {}", out.size(), shape_string(runtime)));
  if (expert < 0 || expert >= experts || n0 < 0 || n0 >= n1 || n1 > n ||
      rows.size() != static_cast<size_t>(n1 - n0))
    transform_mismatch(io, kFp8ChannelWeight,
                       fmt::format("band of expert {} rows [{}, {}) with {} row pointers outside {}", expert, n0, n1,
                                   rows.size(), shape_string(gathered)));
  weight_band(gathered, runtime, expert, n0, n1, rows.data(), out.data());
}

void fp8_channel_weight_rows(std::string_view storage, const Shape& gathered, const Shape& runtime, int64_t expert,
                             int64_t k0, int64_t k1, std::span<const uint8_t* const> rows, std::span<uint8_t> out) {
  const TransformIo io = checked_weight_io(storage, gathered, runtime);
  const size_t rank = gathered.size();
  const int64_t experts = rank == 3 ? gathered[0] : 1;
  const int64_t n = gathered[rank - 2], k = gathered[rank - 1];
  const int64_t kp = runtime[rank - 2], np = runtime[rank - 1];
  if (expert < 0 || expert >= experts || k0 < 0 || k0 >= k1 || k1 > kp || rows.size() != static_cast<size_t>(n))
    transform_mismatch(io, kFp8ChannelWeight,
                       fmt::format("output rows [{}, {}) of expert {} with {} row pointers outside {}", k0, k1, expert,
                                   rows.size(), shape_string(runtime)));
  if (out.size() != static_cast<size_t>((k1 - k0) * np))
    transform_mismatch(io, kFp8ChannelWeight,
                       fmt::format("output of {} bytes for {} rows of {} bytes", out.size(), k1 - k0, np));
  // Output row kk - k0 of the piece is runtime row kk: the tiles read bytes [k0, kr) of each gathered row.
  const int64_t kr = std::min(k1, k);
  const uint8_t* shifted[kTile];
  for (int64_t t0 = 0; t0 < n && k0 < kr; t0 += kTile) {
    const int64_t t1 = std::min(n, t0 + kTile);
    for (int64_t i = t0; i < t1; ++i) shifted[i - t0] = rows[static_cast<size_t>(i)] + k0;
    for (int64_t kk = 0; kk < kr - k0; kk += kTile)
      transpose_tile(shifted, t0, out.data(), np, t0, t1, kk, std::min(kr - k0, kk + kTile));
  }
  for (int64_t kk = k0; kk < k1; ++kk) {
    uint8_t* row = out.data() + (kk - k0) * np;
    if (kk >= k) {
      std::memset(row, 0, static_cast<size_t>(np));
    } else if (np > n) {
      std::memset(row + n, 0, static_cast<size_t>(np - n));
    }
  }
}

void fp8_channel_scale_transform(const TransformIo& io) {
  const size_t rank = io.gathered_shape.size();
  if ((rank != 2 && rank != 3) || io.gathered_shape.back() != 1)
    transform_mismatch(io, kFp8ChannelScale,
                       fmt::format("gathered {} is neither [N, 1] nor [E, N, 1]", shape_string(io.gathered_shape)));
  expect_io(io, kFp8ChannelScale, DType::F32, rank, rank - 1);
  const Shape want = fp8_channel_scale_shape(io.gathered_shape);
  if (io.runtime_shape != want)
    transform_mismatch(io, kFp8ChannelScale,
                       fmt::format("runtime {} is not {}", shape_string(io.runtime_shape), shape_string(want)));
  const int64_t experts = rank == 3 ? io.gathered_shape[0] : 1;
  const int64_t n = io.gathered_shape[rank - 2], np = want.back();
  const size_t row = static_cast<size_t>(n) * sizeof(float), pad = static_cast<size_t>(np - n) * sizeof(float);
  for (int64_t e = 0; e < experts; ++e) {
    uint8_t* dst = io.out.data() + static_cast<size_t>(e * np) * sizeof(float);
    std::memcpy(dst, io.gathered.data() + static_cast<size_t>(e) * row, row);
    std::memset(dst + row, 0, pad);
  }
}

}  // namespace wsb
