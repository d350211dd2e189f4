// Mutation proofs: the reference forward reads the runtime layout after the post-load
// transform, so a wrong transform changes the probe fingerprint. Each test reloads the routed-expert storages of
// every MoE layer on every TP rank through a deliberately wrong variant of the transform (a missing or doubled
// swizzle, a scale applied twice, a forgotten transpose, the w13 halves in the wrong order), checks the runtime
// bytes really differ, and asserts that the logits and the greedy fingerprint (token ids + logprob bits) change;
// reloading through the right transform into the same dirty buffers restores the exact fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform.hpp"
#include "tests/models/moe_forward_test_util.hpp"

namespace wsb {
namespace {

using test::Logits;
using test::RankImages;

/// Writes a storage's runtime bytes from its gathered (un-transformed) bytes.
using Variant =
    std::function<void(const RuntimeStorageSpec& spec, const std::vector<uint8_t>& gathered, std::span<uint8_t> out)>;

class MoeMutations : public ::testing::Test {
 protected:
  void SetUpFor(const std::string& id) {
    profile = test::moe_profile(id);
    weights = test::synth_checkpoint(profile);
    images = std::make_unique<RankImages>(profile, 2, lookup);
    views = images->views();
    model = make_forward(profile, images->layouts, views);
    baseline_logits = test::run_tokens(*model, tokens);
    baseline = test::greedy(*model, tokens, 6);
  }

  /// The gathered bytes of `spec` (its fragments concatenated, before the transform).
  std::vector<uint8_t> gathered(const RuntimeStorageSpec& spec) const {
    RuntimeStorageSpec raw = spec;
    raw.transform = std::string(kTransformNone);
    raw.shape = spec.gathered_shape;
    std::vector<uint8_t> out(raw.bytes());
    load_storage(raw, lookup, out);
    return out;
  }

  /// Reloads every routed-expert storage named "*.<leaf>" of every rank through `variant`; returns how many
  /// storages changed bytes.
  int reload(const std::string& leaf, const Variant& variant) {
    int changed = 0;
    for (size_t r = 0; r < images->layouts.size(); ++r)
      for (size_t i = 0; i < images->layouts[r].storages.size(); ++i) {
        const RuntimeStorageSpec& spec = images->layouts[r].storages[i];
        if (!spec.name.ends_with("mlp.experts." + leaf)) continue;
        std::vector<uint8_t>& bytes = images->bytes[r][i];
        const std::vector<uint8_t> before = bytes;
        variant(spec, gathered(spec), bytes);
        changed += bytes != before ? 1 : 0;
      }
    return changed;
  }

  /// Reloads every storage through the ordinary loader (the right transforms) into the current, dirty buffers.
  void reload_correctly() {
    for (size_t r = 0; r < images->layouts.size(); ++r)
      for (size_t i = 0; i < images->layouts[r].storages.size(); ++i)
        load_storage(images->layouts[r].storages[i], lookup, images->bytes[r][i]);
  }

  /// The fingerprint and the logits moved away from the baseline; the right reload brings both back exactly.
  void expect_fingerprint_changed(const std::string& what) {
    const Logits logits = test::run_tokens(*model, tokens);
    double worst = 0.0;
    for (size_t t = 0; t < logits.size(); ++t)
      for (size_t v = 0; v < logits[t].size(); ++v)
        worst = std::max(worst, static_cast<double>(std::abs(logits[t][v] - baseline_logits[t][v])));
    EXPECT_FALSE(test::bitwise_equal(logits, baseline_logits)) << what;
    EXPECT_NE(test::greedy(*model, tokens, 6), baseline) << what;
    std::printf("%s, %s: fingerprint changed, max |logit delta| = %.3g\n", profile.id.c_str(), what.c_str(), worst);
    reload_correctly();
    EXPECT_TRUE(test::bitwise_equal(test::run_tokens(*model, tokens), baseline_logits)) << what;
    EXPECT_EQ(test::greedy(*model, tokens, 6), baseline) << what;
  }

  ModelProfile profile;
  std::map<std::string, std::vector<uint8_t>> weights;
  CanonicalLookup lookup = [this](const std::string& n) { return std::span<const uint8_t>(weights.at(n)); };
  std::unique_ptr<RankImages> images;
  std::vector<RankStorageView> views;
  std::unique_ptr<ForwardModel> model;
  std::vector<int32_t> tokens = tokenize_bytes("probe: swizzle");
  Logits baseline_logits;
  test::Greedy baseline;
};

/// Runs transform `name` from `in` (shape `in_shape`) into `out` viewed as `out_shape`.
void transform(std::string_view name, const RuntimeStorageSpec& spec, const Shape& in_shape,
               std::span<const uint8_t> in, const Shape& out_shape, std::span<uint8_t> out) {
  std::vector<std::string> sources;
  for (const Fragment& f : spec.fragments) sources.push_back(f.canonical);
  apply_transform(name, TransformIo{spec.name, sources, spec.dtype, in_shape, in, out_shape, out});
}

/// Row-major padding of a gathered [E, M, K] scale into the runtime bytes (what a transform that forgot the
/// swizzle would store): the kernels then read every scale through the swizzled index from the wrong place.
void unswizzled(const RuntimeStorageSpec& spec, const std::vector<uint8_t>& g, std::span<uint8_t> out,
                const Shape& logical) {
  transform(kMxfp4Pad, spec, spec.gathered_shape, g, logical, out);
}

std::vector<uint8_t> sorted(std::span<const uint8_t> b) {
  std::vector<uint8_t> s(b.begin(), b.end());
  std::sort(s.begin(), s.end());
  return s;
}

TEST_F(MoeMutations, Nvfp4BlockScalesReadThroughTheUnswizzledIndex) {
  SetUpFor("kimi-tiny-nvfp4");
  for (const std::string leaf : {"w13_weight_scale", "w2_weight_scale"}) {
    const int changed = reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      std::vector<uint8_t> right(out.size());
      transform(kNvfp4ScaleSwizzle, spec, spec.gathered_shape, g, spec.shape, right);
      unswizzled(spec, g, out, spec.shape);  // [E, Mp, Kp] row-major instead of 128x4 tiles
      EXPECT_EQ(sorted(out), sorted(right));  // the same bytes, only their places differ
    });
    EXPECT_EQ(changed, 2 * (profile.dims.layers - profile.dims.first_dense_layers)) << leaf;
  }
  expect_fingerprint_changed("NVFP4 block scales not swizzled");
}

TEST_F(MoeMutations, Nvfp4BlockScalesSwizzledTwice) {
  SetUpFor("kimi-tiny-nvfp4");
  // A reload that swizzles the already swizzled runtime bytes again (not a pure function of the raw shards).
  reload("w13_weight_scale", [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
    std::vector<uint8_t> once(out.size());
    transform(kNvfp4ScaleSwizzle, spec, spec.gathered_shape, g, spec.shape, once);
    transform(kNvfp4ScaleSwizzle, spec, spec.shape, once, spec.shape, out);
  });
  expect_fingerprint_changed("NVFP4 w13 block scales swizzled twice");
}

TEST_F(MoeMutations, Nvfp4WeightScale2AppliedTwice) {
  SetUpFor("kimi-tiny-nvfp4");
  // alpha = input_scale * weight_scale_2 * weight_scale_2: the global scale folded in once more.
  for (const std::string leaf : {"w13_alpha", "w2_alpha"}) {
    reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      transform(spec.transform, spec, spec.gathered_shape, g, spec.shape, out);
      const int64_t width = spec.gathered_shape[1];  // w13: (in_g, in_u, ws2_g, ws2_u); w2: (in, ws2)
      for (int64_t e = 0; e < spec.shape[0]; ++e) {
        float alpha, scale_2;
        std::memcpy(&alpha, out.data() + 4 * e, 4);
        std::memcpy(&scale_2, g.data() + 4 * (e * width + width - 1), 4);
        alpha *= scale_2;
        std::memcpy(out.data() + 4 * e, &alpha, 4);
      }
    });
  }
  expect_fingerprint_changed("NVFP4 weight_scale_2 applied twice");
}

TEST_F(MoeMutations, Nvfp4W13HalvesInGateUpOrder) {
  SetUpFor("kimi-tiny-nvfp4");
  // FlashInfer's CUTLASS MoE wants [up; gate]; a loader keeping the checkpoint's [gate; up] swaps the halves of
  // every expert's weight rows and block-scale rows.
  for (const std::string leaf : {"w13_weight", "w13_weight_scale"}) {
    reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      const Shape& s = spec.gathered_shape;  // [E, 2 Im, cols]
      const size_t half = static_cast<size_t>(s[1] / 2 * s[2]);
      std::vector<uint8_t> swapped(g.size());
      for (int64_t e = 0; e < s[0]; ++e) {
        const auto* src = g.data() + static_cast<size_t>(e) * 2 * half;
        auto* dst = swapped.data() + static_cast<size_t>(e) * 2 * half;
        std::copy(src + half, src + 2 * half, dst);
        std::copy(src, src + half, dst + half);
      }
      transform(spec.transform, spec, s, swapped, spec.shape, out);
    });
  }
  expect_fingerprint_changed("NVFP4 w13 in [gate; up] order");
}

TEST_F(MoeMutations, Fp8WeightsNotTransposed) {
  SetUpFor("glm-tiny-fp8");
  for (const std::string leaf : {"w13_weight", "w2_weight"}) {
    reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      // [E, N, K] padded to [E, Np, Kp] row-major, where the kernels expect [E, Kp, Np].
      const Shape& r = spec.shape;
      transform(kMxfp4Pad, spec, spec.gathered_shape, g, {r[0], r[2], r[1]}, out);
    });
  }
  expect_fingerprint_changed("FP8 expert weights not transposed");
}

TEST_F(MoeMutations, Fp8ChannelScaleAppliedTwice) {
  SetUpFor("glm-tiny-fp8");
  for (const std::string leaf : {"w13_weight_scale", "w2_weight_scale"}) {
    reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      transform(spec.transform, spec, spec.gathered_shape, g, spec.shape, out);
      for (size_t i = 0; i + 4 <= out.size(); i += 4) {
        float s;
        std::memcpy(&s, out.data() + i, 4);
        s *= s;
        std::memcpy(out.data() + i, &s, 4);
      }
    });
  }
  expect_fingerprint_changed("FP8 channel scale applied twice");
}

TEST_F(MoeMutations, Mxfp4ScalesNotSwizzled) {
  SetUpFor("gpt-oss-tiny-mxfp4");
  for (const std::string leaf : {"w13_weight_scale", "w2_weight_scale"}) {
    const int changed = reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      const Shape& r = spec.shape;  // [E, Mp/32, Kp*32]: logical [E, Mp, Kp]
      unswizzled(spec, g, out, {r[0], r[1] * 32, r[2] / 32});
    });
    EXPECT_EQ(changed, 2 * profile.dims.layers) << leaf;
  }
  expect_fingerprint_changed("MXFP4 scales not swizzled");
}

TEST_F(MoeMutations, Mxfp4ScaleAppliedTwice) {
  SetUpFor("gpt-oss-tiny-mxfp4");
  // 2^(s-127) applied twice = 2^(2(s-127)): code 2s - 127 (the synthetic codes stay well inside [1, 254]).
  for (const std::string leaf : {"w13_weight_scale", "w2_weight_scale"}) {
    reload(leaf, [](const RuntimeStorageSpec& spec, const auto& g, std::span<uint8_t> out) {
      std::vector<uint8_t> doubled(g.size());
      for (size_t i = 0; i < g.size(); ++i) doubled[i] = static_cast<uint8_t>(std::clamp(2 * g[i] - 127, 1, 254));
      transform(spec.transform, spec, spec.gathered_shape, doubled, spec.shape, out);
    });
  }
  expect_fingerprint_changed("MXFP4 scale applied twice");
}

}  // namespace
}  // namespace wsb
