// Transforms without a gathered copy: FP8 weight bands (any partition of the rows of every expert, reading rows in
// place, writes exactly what the whole transform writes, padding included, into a dirty buffer), output row bands
// (contiguous pieces that concatenate to the whole transform), storage_rows
// (pointers to the gathered rows where they lie in the canonical tensors, for every FP8 weight storage of the GLM
// tiny preset at TP 1/2/4), and which transforms are the identity for their shapes (what the fold may place).
#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/transform.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;
using test::error_message;

/// The transposed, zero-padded weight computed element by element (independent of the transform's code).
std::vector<uint8_t> whole_transform(const Shape& g, const std::vector<uint8_t>& in) {
  const size_t rank = g.size();
  const int64_t experts = rank == 3 ? g[0] : 1, n = g[rank - 2], k = g[rank - 1];
  const int64_t np = (n + 15) / 16 * 16, kp = (k + 15) / 16 * 16;
  std::vector<uint8_t> out(static_cast<size_t>(experts * kp * np), 0);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < k; ++col)
        out[static_cast<size_t>((e * kp + col) * np + row)] = in[static_cast<size_t>((e * n + row) * k + col)];
  return out;
}

TEST(Fp8WeightBands, AnyPartitionOfTheRowsWritesTheWholeTransform) {
  std::mt19937 rng(3);
  for (const Shape& g : {Shape{70, 75}, Shape{3, 20, 24}, Shape{2, 130, 64}, Shape{16, 32}}) {
    std::vector<uint8_t> in(shape_numel(g));
    for (auto& b : in) b = static_cast<uint8_t>(1 + rng() % 255);
    const Shape r = fp8_channel_weight_shape(g);
    const std::vector<uint8_t> want = whole_transform(g, in);
    const size_t rank = g.size();
    const int64_t experts = rank == 3 ? g[0] : 1, n = g[rank - 2], k = g[rank - 1];
    for (int64_t band : {int64_t{1}, int64_t{7}, int64_t{64}, n}) {
      std::vector<uint8_t> out(shape_numel(r), 0xCC);
      for (int64_t e = 0; e < experts; ++e) {
        for (int64_t n0 = 0; n0 < n; n0 += band) {
          const int64_t n1 = std::min(n, n0 + band);
          std::vector<const uint8_t*> rows;
          // Rows copied elsewhere first: the band must read through the pointers, not from a gathered layout.
          std::vector<std::vector<uint8_t>> copies;
          for (int64_t row = n0; row < n1; ++row) {
            copies.emplace_back(in.begin() + (e * n + row) * k, in.begin() + (e * n + row + 1) * k);
          }
          for (const auto& c : copies) rows.push_back(c.data());
          fp8_channel_weight_band("w", g, r, e, n0, n1, rows, out);
        }
      }
      EXPECT_EQ(out, want) << shape_string(g) << " band " << band;
    }
  }
}

// Output rows whose 64-column tiles start on cache lines (np a multiple of 64, a 64-byte aligned storage) take the
// streamed-store path; the same storage one line-fraction off takes the regular one. Both write the same bytes.
TEST(Fp8WeightBands, LineAlignedAndUnalignedStoragesGetTheSameBytes) {
  std::mt19937 rng(5);
  for (const Shape& g : {Shape{2, 192, 100}, Shape{128, 64}}) {
    std::vector<uint8_t> in(shape_numel(g));
    for (auto& b : in) b = static_cast<uint8_t>(1 + rng() % 255);
    const Shape r = fp8_channel_weight_shape(g);
    const std::vector<uint8_t> want = whole_transform(g, in);
    const size_t rank = g.size();
    const int64_t experts = rank == 3 ? g[0] : 1, n = g[rank - 2], k = g[rank - 1];
    for (size_t misalign : {size_t{0}, size_t{16}}) {
      for (int64_t band : {int64_t{64}, n}) {
        std::vector<uint8_t> buffer(shape_numel(r) + 128, 0xCC);
        auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) / 64 * 64);
        const std::span<uint8_t> out(base + misalign, shape_numel(r));
        for (int64_t e = 0; e < experts; ++e) {
          for (int64_t n0 = 0; n0 < n; n0 += band) {
            const int64_t n1 = std::min(n, n0 + band);
            std::vector<const uint8_t*> rows;
            for (int64_t row = n0; row < n1; ++row) rows.push_back(in.data() + (e * n + row) * k);
            fp8_channel_weight_band("w", g, r, e, n0, n1, rows, out);
          }
        }
        EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.end()), want)
            << shape_string(g) << " band " << band << " misaligned by " << misalign;
      }
    }
  }
}

TEST(Fp8WeightBands, RefuseBandsOutsideTheWeight) {
  const Shape g{2, 20, 24}, r = fp8_channel_weight_shape(g);
  std::vector<uint8_t> out(shape_numel(r));
  std::vector<const uint8_t*> rows(4, out.data());
  EXPECT_EQ(error_message([&] { fp8_channel_weight_band("w", g, r, 2, 0, 4, rows, out); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': band of expert 2 rows [0, 4) with 4 row pointers outside "
            "[2, 20, 24]");
  EXPECT_EQ(error_message([&] { fp8_channel_weight_band("w", g, r, 0, 18, 22, rows, out); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': band of expert 0 rows [18, 22) with 4 row pointers outside "
            "[2, 20, 24]");
  EXPECT_EQ(error_message([&] { fp8_channel_weight_band("w", g, {2, 24, 20}, 0, 0, 4, rows, out); },
                          ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': runtime [2, 24, 20] is not [2, 32, 32] (gathered [2, 20, 24] "
            "transposed, padded to 16)");
  std::vector<uint8_t> small(10);
  EXPECT_EQ(error_message([&] { fp8_channel_weight_band("w", g, r, 0, 0, 4, rows, small); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': output of 10 bytes for runtime [2, 32, 32]");
}

// Output row bands (device-delta builds each piece apart and compares it with the live bytes): any partition of
// [0, Kp) of every expert, each band written into its own dirty buffer, concatenates to exactly the whole
// transform, padding rows and columns included.
TEST(Fp8WeightRows, AnyPartitionOfTheOutputRowsConcatenatesToTheWholeTransform) {
  std::mt19937 rng(7);
  for (const Shape& g : {Shape{70, 75}, Shape{3, 20, 24}, Shape{2, 130, 64}, Shape{16, 32}, Shape{200, 150}}) {
    std::vector<uint8_t> in(shape_numel(g));
    for (auto& b : in) b = static_cast<uint8_t>(1 + rng() % 255);
    const Shape r = fp8_channel_weight_shape(g);
    const std::vector<uint8_t> want = whole_transform(g, in);
    const size_t rank = g.size();
    const int64_t experts = rank == 3 ? g[0] : 1, n = g[rank - 2], k = g[rank - 1];
    const int64_t kp = r[rank - 2], np = r[rank - 1];
    for (int64_t band : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{64}, kp}) {
      std::vector<uint8_t> out;
      for (int64_t e = 0; e < experts; ++e) {
        std::vector<std::vector<uint8_t>> copies;
        std::vector<const uint8_t*> rows;
        for (int64_t row = 0; row < n; ++row) {
          copies.emplace_back(in.begin() + (e * n + row) * k, in.begin() + (e * n + row + 1) * k);
        }
        for (const auto& c : copies) rows.push_back(c.data());
        for (int64_t k0 = 0; k0 < kp; k0 += band) {
          const int64_t k1 = std::min(kp, k0 + band);
          std::vector<uint8_t> piece(static_cast<size_t>((k1 - k0) * np), 0xCC);
          fp8_channel_weight_rows("w", g, r, e, k0, k1, rows, piece);
          out.insert(out.end(), piece.begin(), piece.end());
        }
      }
      EXPECT_EQ(out, want) << shape_string(g) << " band " << band;
    }
  }
}

TEST(Fp8WeightRows, RefuseBandsOutsideTheWeight) {
  const Shape g{2, 20, 24}, r = fp8_channel_weight_shape(g);  // runtime [2, 32, 32]
  std::vector<uint8_t> out(4 * 32);
  std::vector<const uint8_t*> rows(20, out.data());
  EXPECT_EQ(error_message([&] { fp8_channel_weight_rows("w", g, r, 2, 0, 4, rows, out); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': output rows [0, 4) of expert 2 with 20 row pointers "
            "outside [2, 32, 32]");
  EXPECT_EQ(error_message([&] { fp8_channel_weight_rows("w", g, r, 0, 30, 34, rows, out); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': output rows [30, 34) of expert 0 with 20 row pointers "
            "outside [2, 32, 32]");
  std::vector<const uint8_t*> few(19, out.data());
  EXPECT_EQ(error_message([&] { fp8_channel_weight_rows("w", g, r, 0, 0, 4, few, out); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': output rows [0, 4) of expert 0 with 19 row pointers "
            "outside [2, 32, 32]");
  std::vector<uint8_t> small(10);
  EXPECT_EQ(error_message([&] { fp8_channel_weight_rows("w", g, r, 0, 0, 4, rows, small); }, ErrorKind::Mismatch),
            "storage 'w': transform 'fp8_channel_weight': output of 10 bytes for 4 rows of 32 bytes");
}

TEST(StorageRows, PointAtEachGatheredRowInItsCanonicalTensor) {
  const ModelProfile profile = find_profile("glm-tiny-fp8", kProfiles);
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  int checked = 0;
  for (int tp : {1, 2, 4}) {
    for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
      for (const RuntimeStorageSpec& spec : layout.storages) {
        if (spec.transform != kFp8ChannelWeight) continue;
        std::vector<uint8_t> gathered(spec.gathered_bytes());
        gather_storage(spec, lookup, gathered);
        const uint64_t row = static_cast<uint64_t>(spec.gathered_shape.back());
        const int64_t total = static_cast<int64_t>(gathered.size() / row);
        // Every row through a window that starts mid-way, then the whole range at once.
        for (const auto& [first, count] : {std::pair<int64_t, int64_t>{total / 3, total - total / 3},
                                           std::pair<int64_t, int64_t>{0, total}}) {
          std::vector<const uint8_t*> rows(static_cast<size_t>(count));
          storage_rows(spec, lookup, first, rows);
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_TRUE(std::equal(rows[i], rows[i] + row, gathered.begin() + (first + i) * static_cast<int64_t>(row)))
                << spec.name << " row " << first + i;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10);
  // Outside the gathered rows.
  const std::vector<RankLayout> layouts = build_rank_layouts(profile, 1);
  const RuntimeStorageSpec& spec = layouts[0].storages[0];
  const int64_t total = static_cast<int64_t>(spec.gathered_bytes() / dtype_size(spec.dtype) /
                                             static_cast<uint64_t>(spec.gathered_shape.back()));
  std::vector<const uint8_t*> rows(2);
  EXPECT_EQ(error_message([&] { storage_rows(spec, lookup, total - 1, rows); }, ErrorKind::Mismatch),
            fmt::format("storage '{}': gathered rows [{}, {}) outside its {} rows", spec.name, total - 1, total + 1,
                        total));
}

TEST(TransformIdentity, OnlyWhereNothingMoves) {
  EXPECT_TRUE(transform_is_identity(kTransformNone, DType::BF16, {4, 8}, {4, 8}));
  EXPECT_FALSE(transform_is_identity(kTransformNone, DType::BF16, {8, 4}, {4, 8}));
  EXPECT_TRUE(transform_is_identity(kMxfp4Pad, DType::U8, {2, 64, 3, 16}, {2, 64, 3, 16}));
  EXPECT_FALSE(transform_is_identity(kMxfp4Pad, DType::U8, {2, 48, 3, 16}, {2, 64, 3, 16}));
  EXPECT_TRUE(transform_is_identity(kFp8ChannelScale, DType::F32, {2, 32, 1}, {2, 32}));
  EXPECT_TRUE(transform_is_identity(kFp8ChannelScale, DType::F32, {32, 1}, {32}));
  EXPECT_FALSE(transform_is_identity(kFp8ChannelScale, DType::F32, {2, 20, 1}, {2, 32}));
  EXPECT_FALSE(transform_is_identity(kFp8ChannelScale, DType::BF16, {32, 1}, {32}));
  EXPECT_FALSE(transform_is_identity(kFp8ChannelWeight, DType::F8_E4M3, {32, 32}, {32, 32}));  // a transpose
  EXPECT_FALSE(transform_is_identity("nvfp4_w2_alpha", DType::F32, {4, 2}, {4}));
}

}  // namespace
}  // namespace wsb
