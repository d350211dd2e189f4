// Canonical homes (modes/cpu/canonical_homes.hpp): for every tiny preset at TP 1, 2 and 4, a homed storage holds
// exactly what load_storage builds from the canonical tensors once each homed tensor's bytes are written into its
// home; homes never overlap and each tensor has at most one. At TP 1 the llama preset's every storage is a home (so
// the canonical image keeps nothing of its own); at TP 2 only the replicated norms of rank 0 are. A storage whose
// second run starts off the 64 B alignment, or that names one tensor twice, is not a home.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "modes/cpu/canonical_homes.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

std::vector<RankImage> images_of(const std::vector<RankLayout>& layouts) {
  std::vector<RankImage> images;
  for (const RankLayout& layout : layouts) images.emplace_back(layout);
  return images;
}

class CanonicalHomesOfPresets : public ::testing::TestWithParam<std::string> {};

TEST_P(CanonicalHomesOfPresets, AHomedStorageHoldsExactlyWhatTheLoaderBuilds) {
  const ModelProfile profile = find_profile(GetParam(), kProfiles);
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  for (int tp : {1, 2, 4}) {
    SCOPED_TRACE(tp);
    const std::vector<RankLayout> layouts = build_rank_layouts(profile, tp);
    std::vector<RankImage> images = images_of(layouts);
    const CanonicalHomes homes = canonical_homes(tensors, layouts, images);
    ASSERT_EQ(homes.tensor.size(), tensors.size());
    // Homes are disjoint, each exactly its tensor's size, and add up to `bytes`.
    std::vector<std::pair<const uint8_t*, size_t>> spans;
    uint64_t sum = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (homes.tensor[t].empty()) continue;
      EXPECT_EQ(homes.tensor[t].size(), tensors[t].bytes()) << tensors[t].name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(homes.tensor[t].data()) % kStorageAlignment, 0u) << tensors[t].name;
      spans.emplace_back(homes.tensor[t].data(), homes.tensor[t].size());
      sum += homes.tensor[t].size();
      std::memcpy(homes.tensor[t].data(), canonical.at(tensors[t].name).data(), tensors[t].bytes());
    }
    EXPECT_EQ(homes.bytes, sum);
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k) EXPECT_LE(spans[k - 1].first + spans[k - 1].second, spans[k].first);
    // Every homed storage now holds, byte for byte, what the loader builds for it.
    size_t flat = 0, homed_storages = 0;
    uint64_t homed_storage_bytes = 0;
    for (size_t r = 0; r < layouts.size(); ++r) {
      for (size_t s = 0; s < layouts[r].storages.size(); ++s, ++flat) {
        if (!homes.storage.at(flat)) continue;
        const RuntimeStorageSpec& spec = layouts[r].storages[s];
        std::vector<uint8_t> built(spec.bytes(), 0xAB);
        load_storage(spec, lookup, built);
        const auto image = images[r].storage(s);
        EXPECT_TRUE(std::equal(built.begin(), built.end(), image.begin(), image.end())) << spec.name;
        ++homed_storages;
        homed_storage_bytes += spec.bytes();
      }
    }
    EXPECT_EQ(homes.storage.size(), flat);
    EXPECT_EQ(homed_storage_bytes, homes.bytes);  // a homed storage is nothing but homes
    // At TP 1 every preset keeps at least its norms at home.
    if (tp == 1) {
      EXPECT_GT(homed_storages, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, CanonicalHomesOfPresets,
                         ::testing::ValuesIn(test::tiny_presets()),
                         test::StringParamName());

/// Names of the storages of `layouts` that are homes, as "rank:name".
std::set<std::string> homed_names(const std::vector<RankLayout>& layouts, const CanonicalHomes& homes) {
  std::set<std::string> out;
  size_t flat = 0;
  for (size_t r = 0; r < layouts.size(); ++r) {
    for (const RuntimeStorageSpec& spec : layouts[r].storages) {
      if (homes.storage.at(flat++)) out.insert(std::to_string(r) + ":" + spec.name);
    }
  }
  return out;
}

TEST(CanonicalHomes, LlamaAtTp1IsAllHomesAndAtTp2OnlyRankZerosReplicatedNorms) {
  const ModelProfile profile = find_profile("llama-tiny-bf16", kProfiles);
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  {
    const auto layouts = build_rank_layouts(profile, 1);
    auto images = images_of(layouts);
    const CanonicalHomes homes = canonical_homes(tensors, layouts, images);
    EXPECT_EQ(homes.bytes, profile.canonical_bytes());
    EXPECT_EQ(homed_names(layouts, homes).size(), layouts[0].storages.size());
  }
  const auto layouts = build_rank_layouts(profile, 2);
  auto images = images_of(layouts);
  const CanonicalHomes homes = canonical_homes(tensors, layouts, images);
  std::set<std::string> norms;
  uint64_t norm_bytes = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.find("norm") == std::string::npos) continue;
    norms.insert("0:" + t.name);
    norm_bytes += t.bytes();
  }
  ASSERT_FALSE(norms.empty());
  EXPECT_EQ(homed_names(layouts, homes), norms);
  EXPECT_EQ(homes.bytes, norm_bytes);
}

/// A one-rank layout of one storage gathering `fragments` (whole U8 tensors of the sizes `tensors` gives).
RankLayout one_storage(const std::vector<std::pair<std::string, int64_t>>& fragments) {
  RuntimeStorageSpec spec;
  spec.name = "fused";
  spec.dtype = DType::U8;
  int64_t rows = 0;
  for (const auto& [name, n] : fragments) {
    spec.fragments.push_back(Fragment{name, Shape{n}, 0, 0, n});
    rows += n;
  }
  spec.shape = {rows};
  spec.gathered_shape = spec.shape;
  RankLayout layout;
  layout.storages.push_back(spec);
  return layout;
}

TEST(CanonicalHomes, AMisalignedRunOrARepeatedTensorMakesNoHome) {
  const std::vector<TensorSpec> tensors{TensorSpec{"a", DType::U8, {64}}, TensorSpec{"b", DType::U8, {100}},
                                        TensorSpec{"c", DType::U8, {64}}};
  {
    const std::vector<RankLayout> layouts{one_storage({{"a", 64}, {"c", 64}})};
    auto images = images_of(layouts);
    const CanonicalHomes homes = canonical_homes(tensors, layouts, images);
    EXPECT_EQ(homes.storage, std::vector<bool>{true});
    EXPECT_EQ(homes.tensor[2].data(), images[0].storage(0).data() + 64);
    EXPECT_EQ(homes.bytes, 128u);
  }
  for (const auto& fragments : std::vector<std::vector<std::pair<std::string, int64_t>>>{
           {{"b", 100}, {"c", 64}},  // c would start at byte 100
           {{"a", 64}, {"a", 64}}}) {
    const std::vector<RankLayout> layouts{one_storage(fragments)};
    auto images = images_of(layouts);
    const CanonicalHomes homes = canonical_homes(tensors, layouts, images);
    EXPECT_EQ(homes.storage, std::vector<bool>{false});
    EXPECT_EQ(homes.bytes, 0u);
    for (const auto& home : homes.tensor) EXPECT_TRUE(home.empty());
  }
}

TEST(CanonicalHomes, ImagesAndLayoutsOfDifferentLengthsAreRefused) {
  const ModelProfile profile = find_profile("llama-tiny-bf16", kProfiles);
  const auto layouts = build_rank_layouts(profile, 2);
  auto images = images_of({layouts[0]});
  test::expect_error([&] { canonical_homes(profile.canonical_tensors(), layouts, images); }, ErrorKind::Mismatch,
                     {"1 rank images for 2 rank layouts"});
}

}  // namespace
}  // namespace wsb
