// Device forwards of the MoE families (glm4_moe FP8, deepseek_v3 NVFP4, gpt_oss MXFP4 and BF16) against the CPU
// reference forwards on their tiny presets at TP 1 and 2: the same runtime storages loaded into host memory (CPU
// forward) and into DeviceStorages (device forward) give the same logits and greedy tokens; the device forward is
// bitwise reproducible across instances, graph replay vs direct launches, and slot reuse; a flipped storage byte
// on the device moves the logits as the same flip does on the CPU. Every GPU test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <tuple>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/kernels/device_forward.hpp"
#include "models/profile/llama_family.hpp"
#include "tests/models/moe_forward_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using test::Logits;

// Bound on max|device - cpu| / max|cpu| per step. Both sides compute in float32 from the same bytes; they differ
// only in summation order (warp-strided partial sums and shuffle trees vs sequential loops over up to 128
// elements), fused multiply-adds in the matvecs, and expf/cosf/sinf vs the host libm (<= 2 ulp). Each of those
// is a relative error of a few 1e-7 per reduction; through 2-3 layers of norm, attention and MoE it stays well
// below 1e-5, so 1e-4 leaves a 10x margin yet still catches any layout or formula slip (a wrong scale, swizzle,
// row order, bias or routing decision moves logits by > 1e-2 of their range).
constexpr double kRelTolerance = 1e-4;

bool has_device() { return cuda_ops::visible_devices() > 0; }

#define SKIP_WITHOUT_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device present"

size_t argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

/// max|a - b| / max|b| (b is the reference).
double relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

/// Gap between the largest and second largest logit (how close a greedy choice is to a tie).
double top2_margin(const std::vector<float>& v) {
  std::vector<float> sorted(v);
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  return static_cast<double>(sorted[0]) - static_cast<double>(sorted[1]);
}

class MoeDeviceForward : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    images = std::make_unique<test::RankImages>(profile, tp, lookup);
    host_views = images->views();
    storages = make_device_storages(images->layouts, DeviceStorageOptions{});
    for (size_t r = 0; r < images->bytes.size(); ++r)
      for (size_t i = 0; i < images->bytes[r].size(); ++i) storages->write(static_cast<int>(r), i, 0, images->bytes[r][i]);
    storages->synchronize();
  }

  std::unique_ptr<ForwardModel> cpu() const { return make_forward(profile, images->layouts, host_views); }
  std::unique_ptr<ForwardModel> gpu(bool graphs = true, int sequences = 2) const {
    DeviceForwardOptions options;
    options.max_sequences = sequences;
    options.max_positions = 64;
    options.use_graphs = graphs;
    return make_device_forward(profile, images->layouts, storages->views(), options);
  }
  /// Flips bit 0 of byte `offset` of storage `name` of `rank` on the host copy and on the device.
  void flip_both(int rank, const std::string& name, uint64_t offset) {
    images->storage(rank, name)[offset] ^= 0x01;
    storages->flip_byte(rank, images->layouts[static_cast<size_t>(rank)].index_of(name), offset);
  }
  /// In the last layer's stacked w13 experts of every rank, flips the first byte of every expert whose flipped
  /// code stays finite (E4M3 0x7E ^ 1 would be NaN; E2M1 codes have no NaN; a BF16 weight moves by its last
  /// mantissa bit): whichever experts the router picks, one of their weights changed.
  void flip_every_expert() {
    const std::string name = llama_layer_name(profile.dims.layers - 1, "mlp.experts.w13_weight");
    for (int r = 0; r < tp; ++r) {
      const RuntimeStorageSpec& spec = images->spec(r, name);
      const uint64_t per_expert = spec.bytes() / static_cast<uint64_t>(spec.shape[0]);
      for (int64_t e = 0; e < spec.shape[0]; ++e) {
        uint64_t at = static_cast<uint64_t>(e) * per_expert;
        const bool e4m3 = spec.dtype == DType::F8_E4M3;
        while (e4m3 && ((images->storage(r, name)[at] ^ 0x01) & 0x7F) == 0x7F) ++at;
        flip_both(r, name, at);
      }
    }
  }

  ModelProfile profile = test::moe_profile(std::get<0>(GetParam()));
  int tp = std::get<1>(GetParam());
  std::map<std::string, std::vector<uint8_t>> weights = test::synth_checkpoint(profile);
  CanonicalLookup lookup = [this](const std::string& n) { return std::span<const uint8_t>(weights.at(n)); };
  // Longer than gpt-oss-tiny's sliding window (8), so the window and the sinks both matter.
  std::vector<int32_t> tokens = tokenize_bytes("MoE on the GPU: 0123456789");
  std::unique_ptr<test::RankImages> images;
  std::vector<RankStorageView> host_views;
  std::unique_ptr<DeviceStorages> storages;
};

TEST_P(MoeDeviceForward, MatchesTheCpuForwardOverGreedySteps) {
  const auto reference = cpu();
  const auto device = gpu();
  ASSERT_EQ(device->vocab(), profile.dims.vocab);
  auto seq_cpu = reference->new_sequence();
  auto seq_gpu = device->new_sequence();
  const std::vector<int32_t> prompt = tokenize_bytes("MoE: ");
  constexpr int kGreedySteps = 14;
  std::vector<float> want, got;
  int32_t next = prompt[0];
  double worst = 0.0;
  for (size_t step = 0; step < prompt.size() + kGreedySteps; ++step) {
    reference->step(*seq_cpu, next, want);
    device->step(*seq_gpu, next, got);
    ASSERT_EQ(got.size(), static_cast<size_t>(profile.dims.vocab));
    ASSERT_EQ(seq_gpu->position(), static_cast<int64_t>(step + 1));
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
    const double rel = relative_diff(got, want);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, kRelTolerance) << "step " << step;
    // Greedy: the device picks the CPU's token (the CPU's choice drives both, so one slip does not cascade).
    EXPECT_EQ(argmax(got), argmax(want)) << "step " << step << ", CPU top-2 margin " << top2_margin(want);
    next = step + 1 < prompt.size() ? prompt[step + 1] : static_cast<int32_t>(argmax(want));
  }
  RecordProperty("max_relative_diff", std::to_string(worst));
  std::printf("%s tp=%d max |device - cpu| / max |cpu| = %.3g\n", profile.id.c_str(), tp, worst);
}

TEST_P(MoeDeviceForward, TwoRunsAreBitwiseEqual) {
  const auto first = gpu();
  const Logits a = test::run_tokens(*first, tokens);
  const Logits again = test::run_tokens(*first, tokens);  // a second sequence of the same model
  const auto second = gpu();                               // another instance over the same storages
  const Logits b = test::run_tokens(*second, tokens);
  ASSERT_EQ(a.size(), tokens.size());
  EXPECT_TRUE(test::bitwise_equal(a, again));
  EXPECT_TRUE(test::bitwise_equal(a, b));
}

TEST_P(MoeDeviceForward, GraphReplayEqualsDirectLaunchesBitwise) {
  const Logits graphs = test::run_tokens(*gpu(true), tokens);
  const Logits direct = test::run_tokens(*gpu(false), tokens);
  EXPECT_TRUE(test::bitwise_equal(graphs, direct));
}

TEST_P(MoeDeviceForward, SequenceInAReusedSlotGivesTheSameLogits) {
  const Logits fresh = test::run_tokens(*gpu(true, 1), tokens);
  const auto model = gpu(true, 1);  // one slot: the second sequence reuses the first one's caches and graph
  const std::vector<int32_t> other = tokenize_bytes("a longer, different sequence that leaves stale cache rows");
  ASSERT_GT(other.size(), tokens.size());
  const Logits first = test::run_tokens(*model, other);
  const Logits reused = test::run_tokens(*model, tokens);
  EXPECT_TRUE(test::bitwise_equal(fresh, reused));
  EXPECT_FALSE(test::bitwise_equal(Logits(first.begin(), first.begin() + static_cast<long>(tokens.size())), reused));
}

TEST_P(MoeDeviceForward, FlippedExpertBytesMoveDeviceLogitsLikeCpuLogits) {
  const auto device = gpu();
  const Logits before = test::run_tokens(*device, tokens);
  flip_every_expert();
  // The same model, unchanged: its captured graph reads the storages afresh at every replay.
  const Logits after = test::run_tokens(*device, tokens);
  const Logits want = test::run_tokens(*cpu(), tokens);
  EXPECT_FALSE(test::bitwise_equal(before, after));
  for (size_t step = 0; step < tokens.size(); ++step)
    EXPECT_LT(relative_diff(after[step], want[step]), kRelTolerance) << "step " << step;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string name = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, MoeDeviceForward,
                         ::testing::Combine(::testing::ValuesIn(test::kMoeTinyProfiles), ::testing::Values(1, 2)),
                         case_name);

// Runs everywhere (no device needed): the MoE families are dispatched, and views that disagree with the layouts
// are rejected naming the storage before any device is touched; a build without CUDA says so.
TEST(MoeDeviceForwardChecks, RejectsViewsThatDisagreeWithTheLayouts) {
  alignas(64) static const uint8_t fake[64] = {};
  for (const std::string& id : test::kMoeTinyProfiles) {
    const ModelProfile profile = test::moe_profile(id);
    const std::vector<RankLayout> layouts = build_rank_layouts(profile, 1);
    std::vector<DeviceRankView> views(1);
    for (const RuntimeStorageSpec& s : layouts[0].storages) {
      views[0].storages.push_back(fake);
      views[0].bytes.push_back(s.bytes());
    }
    views[0].bytes[1] += 1;
    SCOPED_TRACE(id);
    auto make = [&] { make_device_forward(profile, layouts, views); };
    if (!cuda_ops::built()) {
      test::expect_error(make, ErrorKind::Resource, {"built without CUDA"});
    } else {
      test::expect_error(make, ErrorKind::Mismatch,
                         {layouts[0].storages[1].name, std::to_string(layouts[0].storages[1].bytes() + 1) + " bytes"});
    }
  }
}

}  // namespace
}  // namespace wsb
