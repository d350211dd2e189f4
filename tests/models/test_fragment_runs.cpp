// Chunked placement (models/layout fragment_runs / place_run_range): for every plain-gather storage of the tiny
// presets at TP 1, 2 and 4, placing each canonical tensor chunk by chunk (random chunk sizes, the way prepare's fold
// reports final bytes) into a dirty buffer gives byte for byte what load_storage writes; the runs cover every byte
// once; storages whose transform moves bytes have no runs (an identity transform at its shapes has them).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "models/layout/fragment_runs.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "models/transform/transform.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

class FragmentRuns : public ::testing::TestWithParam<std::string> {};

TEST_P(FragmentRuns, ChunkedPlacementWritesExactlyWhatLoadStorageWrites) {
  const ModelProfile profile = find_profile(GetParam(), kProfiles);
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  std::mt19937_64 rng(5);
  int plain = 0, strided = 0, identity = 0;
  for (int tp : {1, 2, 4}) {
    for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
      for (const RuntimeStorageSpec& spec : layout.storages) {
        const std::vector<FragmentRun> runs = fragment_runs(spec);
        if (!transform_is_identity(spec.transform, spec.dtype, spec.gathered_shape, spec.shape)) {
          EXPECT_TRUE(runs.empty()) << spec.name;
          continue;
        }
        ASSERT_EQ(runs.size(), spec.fragments.size()) << spec.name;
        ++plain;
        if (spec.transform != "none") ++identity;
        std::vector<uint8_t> whole(spec.bytes(), 0xAB), placed(spec.bytes(), 0xCD);
        load_storage(spec, lookup, whole);
        uint64_t covered = 0;
        for (const FragmentRun& run : runs) {
          if (run.outer > 1 && run.block < run.stride) ++strided;
          covered += run.block * run.outer;
          const auto& src = canonical.at(run.canonical);
          EXPECT_EQ(run.canonical_bytes, src.size()) << run.canonical;
          for (uint64_t from = 0; from < src.size();) {
            const uint64_t to = std::min<uint64_t>(src.size(), from + 1 + rng() % 777);
            place_run_range(run, src, from, to, placed);
            from = to;
          }
        }
        EXPECT_EQ(covered, spec.bytes()) << spec.name;
        EXPECT_EQ(placed, whole) << spec.name << " tp " << tp << " rank " << layout.rank;
      }
    }
  }
  EXPECT_GT(plain, 0);
  if (GetParam() == "llama-tiny-bf16") {
    EXPECT_GT(strided, 0) << "no column-sliced fragment exercised";
  }
  // Transforms that move nothing at these shapes are placed too: MXFP4 values whose rows need no padding,
  // FP8 scales whose N is a multiple of 16.
  if (GetParam() == "gpt-oss-tiny-mxfp4" || GetParam() == "glm-tiny-fp8") {
    EXPECT_GT(identity, 0) << "no identity transform exercised";
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, FragmentRuns,
                         ::testing::Values(std::string("llama-tiny-bf16"), std::string("glm-tiny-fp8"),
                                           std::string("kimi-tiny-nvfp4"), std::string("gpt-oss-tiny-mxfp4"),
                                           std::string("gpt-oss-tiny-bf16")),
                         test::StringParamName());

TEST(FragmentRunsOther, AFragmentOutsideItsTensorIsLeftToLoadStorage) {
  RuntimeStorageSpec spec;
  spec.name = "s";
  spec.dtype = DType::BF16;
  spec.shape = spec.gathered_shape = {4, 8};
  Fragment f;
  f.canonical = "t";
  f.canonical_shape = {4, 8};
  f.dim = 0;
  f.start = 0;
  f.length = 4;
  spec.fragments = {f};
  ASSERT_EQ(fragment_runs(spec).size(), 1u);
  EXPECT_EQ(fragment_runs(spec)[0].block, 64u);
  spec.fragments[0].start = 1;  // [1, 5) of 4 rows
  EXPECT_TRUE(fragment_runs(spec).empty());
  spec.fragments[0].start = 0;
  spec.gathered_shape = {8, 4};
  EXPECT_TRUE(fragment_runs(spec).empty());
}

}  // namespace
}  // namespace wsb
