// Slice loads (models/layout load_storage_slices, load_storage_slices_into): for every splittable storage (rows of
// untransformed ones, experts of stacked ones) of the tiny presets at TP 1, 2 and 4, loading random disjoint expert
// ranges into a dirty buffer, in place or on their own, gives byte for byte what load_storage gives for the whole
// storage (so prepare may split a storage across threads); a 2-D transformed weight is one slice; a range outside
// the slices, or an output of another size, is refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

class StorageSlices : public ::testing::TestWithParam<std::string> {};

TEST_P(StorageSlices, ExpertRangesLoadExactlyWhatTheWholeLoadWrites) {
  const ModelProfile profile = find_profile(GetParam(), kProfiles);
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  std::mt19937_64 rng(9);
  int split = 0;
  for (int tp : {1, 2, 4}) {
    for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
      for (const RuntimeStorageSpec& spec : layout.storages) {
        const int64_t slices = storage_slices(spec);
        if (slices == 1) continue;
        ++split;
        EXPECT_EQ(slices, spec.shape[0]) << spec.name;
        std::vector<uint8_t> whole(spec.bytes(), 0xAB), pieces(spec.bytes(), 0xCD);
        load_storage(spec, lookup, whole);
        const uint64_t slice = spec.bytes() / static_cast<uint64_t>(slices);
        for (int64_t first = 0; first < slices;) {
          const int64_t count = std::min<int64_t>(slices - first, 1 + static_cast<int64_t>(rng() % 3));
          load_storage_slices(spec, lookup, pieces, first, count);
          // The same slices on their own (slice `first` at byte 0), into a dirty buffer.
          std::vector<uint8_t> alone(slice * static_cast<uint64_t>(count), 0xEF);
          load_storage_slices_into(spec, lookup, alone, first, count);
          EXPECT_TRUE(std::equal(alone.begin(), alone.end(), whole.begin() + static_cast<std::ptrdiff_t>(slice * first)))
              << spec.name << " tp " << tp << " slices [" << first << ", " << first + count << ")";
          first += count;
        }
        EXPECT_EQ(pieces, whole) << spec.name << " tp " << tp;
      }
    }
  }
  EXPECT_GT(split, 0) << "no splittable storage found";
}

INSTANTIATE_TEST_SUITE_P(Tiny, StorageSlices,
                         ::testing::ValuesIn(test::tiny_presets()),
                         test::StringParamName());

TEST(StorageSlicesOther, TransformedDenseStoragesAreOneSliceAndBadRangesAreRefused) {
  const ModelProfile glm = find_profile("glm-tiny-fp8", kProfiles);
  const auto layout = build_rank_layouts(glm, 1)[0];
  int dense = 0;
  for (const RuntimeStorageSpec& spec : layout.storages) {
    // A 2-D FP8 weight transposes [N, K] into [Kp, Np]: its rows are not the runtime's rows.
    if (spec.transform == "fp8_channel_weight" && spec.gathered_shape.size() == 2) {
      EXPECT_EQ(storage_slices(spec), 1) << spec.name;
      ++dense;
    }
  }
  EXPECT_GT(dense, 0);
  for (const RuntimeStorageSpec& spec : layout.storages) {
    if (storage_slices(spec) < 2) continue;
    std::vector<uint8_t> out(spec.bytes());
    const auto canonical = test::layout_canonical(glm);
    const CanonicalLookup lookup = [&](const std::string& n) { return std::span<const uint8_t>(canonical.at(n)); };
    EXPECT_EQ(test::error_text([&] { load_storage_slices(spec, lookup, out, spec.shape[0] - 1, 2); }),
              fmt::format("storage '{}': slices [{}, {}) outside its {} independent slices", spec.name,
                          spec.shape[0] - 1, spec.shape[0] + 1, spec.shape[0]));
    const uint64_t slice = spec.bytes() / static_cast<uint64_t>(spec.shape[0]);
    std::vector<uint8_t> short_out(2 * slice - 1);
    EXPECT_EQ(test::error_text([&] { load_storage_slices_into(spec, lookup, short_out, 0, 2); }),
              fmt::format("storage '{}': output buffer has {} bytes, slices [0, 2) need {}", spec.name,
                          2 * slice - 1, 2 * slice));
    return;
  }
  ADD_FAILURE() << "glm-tiny-fp8 has no stacked-expert storage";
}

}  // namespace
}  // namespace wsb
