// Storage pieces (models/layout storage_pieces, load_storage_piece): for every storage of the tiny presets at TP 1, 2
// and 4, its pieces, built in a shuffled order into a dirty buffer, give byte for byte what load_storage gives for
// the whole storage, with pieces of 1 byte (every slice or 64-row band its own piece) and of 64 KiB; FP8 weights,
// 2-D ones included, are cut into bands; a storage of one slice is one piece.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "models/layout/storage_pieces.hpp"
#include "models/profile/profile.hpp"
#include "models/transform/fp8_channel.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

class StoragePieces : public ::testing::TestWithParam<std::string> {};

TEST_P(StoragePieces, PiecesInAnyOrderWriteExactlyWhatTheWholeLoadWrites) {
  const ModelProfile profile = find_profile(GetParam(), kProfiles);
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  std::mt19937_64 rng(5);
  int cut = 0;
  PieceScratch scratch;
  for (int tp : {1, 2, 4}) {
    for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
      for (const RuntimeStorageSpec& spec : layout.storages) {
        std::vector<uint8_t> whole(spec.bytes(), 0xAB);
        // The tiny presets' bytes are not valid for every transform (kimi's fused w13 needs equal scales): such a
        // storage must fail the same way piece by piece.
        const std::string whole_error = test::error_text([&] { load_storage(spec, lookup, whole); });
        for (uint64_t piece_bytes : {uint64_t{1}, uint64_t{64} << 10}) {
          std::vector<StoragePiece> pieces = storage_pieces(spec, piece_bytes);
          if (!whole_error.empty()) {
            std::vector<uint8_t> out(spec.bytes());
            EXPECT_EQ(test::error_text([&] {
                        for (const StoragePiece& p : pieces) load_storage_piece(spec, lookup, p, out, scratch);
                      }),
                      whole_error);
            continue;
          }
          ASSERT_FALSE(pieces.empty()) << spec.name;
          uint64_t moved = 0;
          for (const StoragePiece& p : pieces) moved += p.bytes;
          // Slices move the runtime bytes; bands the gathered bytes they transpose (padding is not counted).
          EXPECT_EQ(moved, loads_by_band(spec) ? spec.gathered_bytes() : spec.bytes()) << spec.name;
          if (pieces.size() > 1) ++cut;
          if (loads_by_band(spec)) {
            EXPECT_TRUE(std::all_of(pieces.begin(), pieces.end(), [](const StoragePiece& p) { return p.n1 > p.n0; }))
                << spec.name;
          }
          if (storage_slices(spec) == 1 && !loads_by_band(spec)) {
            EXPECT_EQ(pieces.size(), 1u) << spec.name;
          }
          std::shuffle(pieces.begin(), pieces.end(), rng);
          std::vector<uint8_t> out(spec.bytes(), 0xCD);
          for (const StoragePiece& p : pieces) load_storage_piece(spec, lookup, p, out, scratch);
          EXPECT_EQ(out, whole) << spec.name << " tp " << tp << " pieces of " << piece_bytes << " bytes";
        }
      }
    }
  }
  EXPECT_GT(cut, 0) << "no storage was cut into several pieces";
}

INSTANTIATE_TEST_SUITE_P(Tiny, StoragePieces,
                         ::testing::ValuesIn(test::tiny_presets()),
                         test::StringParamName());

TEST(StoragePiecesFp8, TwoDimensionalWeightsAreCutIntoBandsOf64Rows) {
  const ModelProfile glm = find_profile("glm-tiny-fp8", kProfiles);
  int dense = 0;
  const std::vector<RankLayout> layouts = build_rank_layouts(glm, 1);
  for (const RuntimeStorageSpec& spec : layouts[0].storages) {
    if (spec.transform != kFp8ChannelWeight || spec.gathered_shape.size() != 2) continue;
    ++dense;
    EXPECT_TRUE(loads_by_band(spec)) << spec.name;
    const int64_t n = spec.gathered_shape[0];
    const std::vector<StoragePiece> pieces = storage_pieces(spec, 1);
    ASSERT_EQ(static_cast<int64_t>(pieces.size()), (n + 63) / 64) << spec.name;
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_EQ(pieces[i].first, 0);
      EXPECT_EQ(pieces[i].n0, static_cast<int64_t>(i) * 64);
      EXPECT_EQ(pieces[i].n1, std::min<int64_t>(n, static_cast<int64_t>(i + 1) * 64));
    }
  }
  EXPECT_GT(dense, 0) << "glm-tiny-fp8 has no 2-D FP8 weight";
}

}  // namespace
}  // namespace wsb
