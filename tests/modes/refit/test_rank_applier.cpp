// The rank applier's batches: placing a batch in pieces across a pool (pieces far smaller than a weight, so every
// kind of storage is written from several threads) builds exactly the rank images that applying weight by weight
// builds, on a dense and a quantized MoE preset at TP 2; the checks run before any byte is copied.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "models/checkpoint/checkpoint.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/refit/rank_applier.hpp"
#include "modes/refit/trainer_sim.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/param_names.hpp"
#include "tests/support/test_support.hpp"

namespace wsb::refit {
namespace {

/// Rank images of every rank built from `trainer`'s shards: weight by weight (pool null), or in batches of
/// `batch` weights across `pool` in pieces of `min_piece` bytes.
std::vector<std::vector<uint8_t>> build(const std::vector<RankLayout>& layouts, const RankShards& shards,
                                        const TrainerSim& trainer, WorkPool* pool, size_t batch, uint64_t min_piece) {
  std::vector<std::vector<uint8_t>> out;
  const auto index = [&](const std::string& name) { return *trainer.image().index_of(name); };
  for (size_t r = 0; r < layouts.size(); ++r) {
    RankImage image(layouts[r]);
    RankApplier applier(static_cast<int>(r), layouts[r], shards[r], index);
    applier.begin(image);
    const std::vector<ShardWeight> weights = trainer.rank_weights(static_cast<int>(r));
    for (size_t first = 0; first < weights.size(); first += batch) {
      std::vector<ArrivedWeight> arrived;
      for (size_t k = first; k < std::min(weights.size(), first + batch); ++k) arrived.push_back({k, weights[k].bytes});
      if (pool == nullptr) {
        for (const auto& a : arrived) applier.apply(a.index, a.bytes);
      } else {
        applier.apply_batch(arrived, pool, min_piece);
      }
    }
    applier.finish();
    std::vector<uint8_t> bytes;
    for (size_t s = 0; s < image.storage_count(); ++s) {
      const auto storage = image.storage(s);
      bytes.insert(bytes.end(), storage.begin(), storage.end());
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

class RankApplierBatches : public ::testing::TestWithParam<std::string> {};

TEST_P(RankApplierBatches, PiecesAcrossAPoolBuildTheSameImagesAsWeightByWeight) {
  test::TempDir dir;
  const ModelProfile profile = test::tiny_profile(GetParam());
  write_full_checkpoint(profile, 3, 0, std::nullopt, dir / "full");
  const std::vector<RankLayout> layouts = build_rank_layouts(profile, 2);
  const RankShards shards = plan_rank_shards(profile.canonical_tensors(), layouts);
  TrainerSim trainer(profile, shards);
  PhaseLog log;
  trainer.load(CheckpointReader(dir / "full"), 0, log);
  trainer.advance(dir / "no-store", 0, 1, log, [] {});  // cuts the column shards at the version it holds
  const auto reference = build(layouts, shards, trainer, nullptr, 1, 0);
  WorkPool pool(3);
  for (size_t batch : {size_t{1}, size_t{5}, size_t{1000}}) {
    EXPECT_EQ(build(layouts, shards, trainer, &pool, batch, 64), reference) << "batch " << batch;
  }
}

TEST_P(RankApplierBatches, EveryWeightIsCheckedBeforeAnyByteIsCopied) {
  const ModelProfile profile = test::tiny_profile(GetParam());
  const std::vector<RankLayout> layouts = build_rank_layouts(profile, 2);
  const RankShards shards = plan_rank_shards(profile.canonical_tensors(), layouts);
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < shards[0].size(); ++i) names[shards[0][i].spec.name] = i;
  RankImage image(layouts[0]);
  RankApplier applier(0, layouts[0], shards[0], [&](const std::string& n) { return names.at(n); });
  applier.begin(image);
  std::vector<uint8_t> good(shards[0][0].spec.bytes(), 0x11), bad(shards[0][1].spec.bytes() + 1, 0x22);
  const std::vector<ArrivedWeight> batch{{0, good}, {1, bad}};
  WorkPool pool(2);
  EXPECT_EQ(test::error_message([&] { applier.apply_batch(batch, &pool, 64); }, ErrorKind::Mismatch),
            fmt::format("refit: rank 0: weight '{}' arrived with {} B, its shard {} {} has {} B", shards[0][1].spec.name,
                        bad.size(), dtype_name(shards[0][1].spec.dtype), shape_string(shards[0][1].spec.shape),
                        shards[0][1].spec.bytes()));
  for (size_t s = 0; s < image.storage_count(); ++s) {
    const auto storage = image.storage(s);
    EXPECT_EQ(std::count(storage.begin(), storage.end(), 0), static_cast<std::ptrdiff_t>(storage.size())) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, RankApplierBatches,
                         ::testing::Values(std::string("llama-tiny-bf16"), std::string("kimi-tiny-nvfp4")),
                         test::StringParamName());

}  // namespace
}  // namespace wsb::refit
