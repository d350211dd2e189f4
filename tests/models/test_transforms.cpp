// Post-load transforms: exact offsets at hand-computed positions (FP8 transpose, NVFP4 128x4 swizzle, MXFP4
// Hopper scale swizzle, MXFP4 values), whole outputs against an independent emulation of the reference
// reshape/permute, zeroed padding in dirty buffers, NVFP4 per-expert scalars (alpha, input scale, weight_scale_2
// and its gate/up mismatch error), shape errors, and reload safety through load_storage for every transformed
// storage of the tiny presets: fresh, second and third reloads, dirty buffers and buffers of another version.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "core/errors.hpp"
#include "models/layout/moe_access.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

using test::expect_error;

/// Distinct non-zero bytes, so that a zero in the output is padding.
std::vector<uint8_t> codes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(1 + (i * 2654435761u + seed * 40503u) % 255);
  return b;
}

/// Runs a transform into a buffer pre-filled with 0xCC (a previous load's leftovers).
std::vector<uint8_t> run(std::string_view name, DType dtype, const Shape& gathered_shape,
                         const std::vector<uint8_t>& gathered, const Shape& runtime,
                         const std::vector<std::string>& sources = {}) {
  std::vector<uint8_t> out(shape_numel(runtime) * dtype_size(dtype), 0xCC);
  apply_transform(name, TransformIo{"test.storage", sources, dtype, gathered_shape, gathered, runtime, out});
  return out;
}

/// Row-major tensor `data` of shape `dims` permuted by `perm` (torch.permute + contiguous), an emulation of the
/// reference implementations' reshape/permute independent of the transform code.
std::vector<uint8_t> permute(const std::vector<uint8_t>& data, const Shape& dims, const std::vector<int>& perm) {
  const size_t r = dims.size();
  Shape out_dims(r);
  for (size_t i = 0; i < r; ++i) out_dims[i] = dims[static_cast<size_t>(perm[i])];
  std::vector<int64_t> in_stride(r, 1);
  for (size_t i = r - 1; i > 0; --i) in_stride[i - 1] = in_stride[i] * dims[i];
  std::vector<uint8_t> out(data.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t src = 0;
    for (size_t i = 0; i < r; ++i) src += idx[i] * in_stride[static_cast<size_t>(perm[i])];
    out[o] = data[static_cast<size_t>(src)];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

/// Zero-pads a per-expert [E, M, K] byte matrix to [E, Mp, Kp] (torch.nn.functional.pad).
std::vector<uint8_t> pad3(const std::vector<uint8_t>& in, int64_t e, int64_t m, int64_t k, int64_t mp, int64_t kp) {
  std::vector<uint8_t> out(static_cast<size_t>(e * mp * kp), 0);
  for (int64_t x = 0; x < e; ++x)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j)
        out[static_cast<size_t>((x * mp + i) * kp + j)] = in[static_cast<size_t>((x * m + i) * k + j)];
  return out;
}

TEST(Fp8Channel, ShapesAndHandOffsets) {
  EXPECT_EQ(fp8_channel_weight_shape({20, 24}), (Shape{32, 32}));
  EXPECT_EQ(fp8_channel_weight_shape({2, 20, 24}), (Shape{2, 32, 32}));
  EXPECT_EQ(fp8_channel_weight_shape({4096, 1368}), (Shape{1376, 4096}));  // GLM dense down_proj at TP 8
  EXPECT_EQ(fp8_channel_scale_shape({20, 1}), (Shape{32}));
  EXPECT_EQ(fp8_channel_scale_shape({2, 20, 1}), (Shape{2, 32}));
  EXPECT_EQ(fp8_channel_weight_offset({2, 32, 32}, 1, 3, 5), 1187u);  // (1*32 + 5)*32 + 3
  EXPECT_EQ(fp8_channel_weight_offset({32, 48}, 0, 47, 31), 31u * 48u + 47u);
  EXPECT_EQ(fp8_channel_scale_offset({2, 32}, 1, 3), 140u);  // (32 + 3) * 4 bytes
}

TEST(Fp8Channel, TransposesAndZeroesPadding) {
  // [2, 20, 24]: partial 8x8 blocks at the N edge; [1, 70, 75]: crosses a 64-wide tile on both dims, odd K.
  for (const Shape& g : {Shape{2, 20, 24}, Shape{1, 70, 75}}) {
    const int64_t experts = g[0], n_dim = g[1], k_dim = g[2], np = (n_dim + 15) / 16 * 16, kp = (k_dim + 15) / 16 * 16;
    std::vector<uint8_t> in = codes(shape_numel(g), 1);
    std::vector<uint8_t> out = run(kFp8ChannelWeight, DType::F8_E4M3, g, in, {experts, kp, np});
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t k = 0; k < kp; ++k)
        for (int64_t n = 0; n < np; ++n) {
          const uint8_t want = (n < n_dim && k < k_dim) ? in[static_cast<size_t>((e * n_dim + n) * k_dim + k)] : 0;
          ASSERT_EQ(out[static_cast<size_t>((e * kp + k) * np + n)], want) << e << " " << n << " " << k;
        }
  }
  // Scales: [E, N, 1] F32 -> [E, Np] with zero floats after N.
  std::vector<uint8_t> s(2 * 20 * 4);
  for (int i = 0; i < 40; ++i) {
    const float v = 0.5f + static_cast<float>(i);
    std::memcpy(&s[static_cast<size_t>(i) * 4], &v, 4);
  }
  std::vector<uint8_t> so = run(kFp8ChannelScale, DType::F32, {2, 20, 1}, s, {2, 32});
  float v;
  std::memcpy(&v, &so[fp8_channel_scale_offset({2, 32}, 1, 19)], 4);
  EXPECT_EQ(v, 0.5f + 39.0f);
  std::memcpy(&v, &so[fp8_channel_scale_offset({2, 32}, 1, 20)], 4);
  EXPECT_EQ(v, 0.0f);
  std::memcpy(&v, &so[fp8_channel_scale_offset({2, 32}, 0, 31)], 4);
  EXPECT_EQ(v, 0.0f);
}

TEST(Fp8Channel, ShapeAndDtypeErrors) {
  std::vector<uint8_t> in(20 * 24);
  expect_error(
      [&] {
        run(kFp8ChannelWeight, DType::F8_E4M3, {20, 24}, in, {32, 24});
      },
      ErrorKind::Mismatch,
      {"storage 'test.storage'", "transform 'fp8_channel_weight'", "runtime [32, 24] is not [32, 32]"});
  expect_error(
      [&] {
        run(kFp8ChannelWeight, DType::U8, {20, 24}, in, {32, 32});
      },
      ErrorKind::Mismatch, {"dtype U8 is not F8_E4M3"});
  expect_error(
      [&] {
        run(kFp8ChannelScale, DType::F32, {30, 4}, std::vector<uint8_t>(480), {32});
      },
      ErrorKind::Mismatch, {"gathered [30, 4] is neither [N, 1] nor [E, N, 1]"});
  expect_error(
      [&] {
        run(kFp8ChannelWeight, DType::F8_E4M3, {20, 24}, std::vector<uint8_t>(10), {32, 32});
      },
      ErrorKind::Mismatch, {"buffers of 10 / 1024 bytes"});
}

TEST(Nvfp4, HandComputedSwizzleOffsets) {
  EXPECT_EQ(nvfp4_scale_swizzled_shape({2, 150, 5}), (Shape{2, 256, 8}));
  EXPECT_EQ(nvfp4_scale_swizzled_shape({384, 4096, 448}), (Shape{384, 4096, 448}));  // Kimi w13 at TP 1: aligned
  const Shape r{2, 256, 8};  // Mp = 256, Kp = 8: a tile row holds 2 tiles of 512 bytes
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 0, 0), 0u);
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 1, 0), 16u);      // r32 = 1
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 32, 0), 4u);      // r4 = 1
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 0, 1), 1u);       // k4 = 1
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 0, 4), 512u);     // kt = 1
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 128, 0), 1024u);  // mt = 1: 128 * Kp
  EXPECT_EQ(nvfp4_scale_offset(r, 0, 37, 5), 597u);    // r4 1, r32 5, kt 1, k4 1: 512 + 80 + 4 + 1
  EXPECT_EQ(nvfp4_scale_offset(r, 1, 0, 0), 2048u);    // expert stride Mp * Kp
  EXPECT_EQ(nvfp4_scale_offset(r, 1, 200, 6), 3722u);  // 2048 + 1024 + 512 + 8*16 + 2*4 + 2
  // Packed weights: low nibble even k.
  EXPECT_EQ(nvfp4_weight_offset({8, 64, 64}, 3, 10, 7), (3u * 64u + 10u) * 64u + 3u);
}

TEST(Nvfp4, SwizzleMatchesTheReferenceReshapePermute) {
  const int64_t e = 2, m = 150, k = 5, mp = 256, kp = 8;
  std::vector<uint8_t> in = codes(static_cast<size_t>(e * m * k), 2);
  std::vector<uint8_t> out = run(kNvfp4ScaleSwizzle, DType::F8_E4M3, {e, m, k}, in, {e, mp, kp});
  // SGLang/FlashInfer swizzle_blockscale: pad to (Mp, Kp), reshape(E, Mp/128, 4, 32, Kp/4, 4),
  // permute(0, 1, 4, 3, 2, 5).
  std::vector<uint8_t> want = permute(pad3(in, e, m, k, mp, kp), {e, mp / 128, 4, 32, kp / 4, 4}, {0, 1, 4, 3, 2, 5});
  EXPECT_EQ(out, want);
  EXPECT_EQ(out[nvfp4_scale_offset({e, mp, kp}, 1, 149, 4)], in[static_cast<size_t>((1 * m + 149) * k + 4)]);
  EXPECT_EQ(out[nvfp4_scale_offset({e, mp, kp}, 1, 150, 0)], 0);  // padded row
  EXPECT_EQ(out[nvfp4_scale_offset({e, mp, kp}, 0, 3, 7)], 0);    // padded column
  expect_error(
      [&] {
        run(kNvfp4ScaleSwizzle, DType::F8_E4M3, {e, m, k}, in, {e, mp, k});
      },
      ErrorKind::Mismatch, {"transform 'nvfp4_scale_swizzle'", "runtime [2, 256, 5] is not [2, 256, 8]"});
}

std::vector<uint8_t> floats(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  size_t i = 0;
  for (float f : v) std::memcpy(&b[4 * i++], &f, 4);
  return b;
}

float f32(const std::vector<uint8_t>& b, size_t i) {
  float v;
  std::memcpy(&v, &b[4 * i], 4);
  return v;
}

TEST(Nvfp4, PerExpertScalars) {
  const std::vector<std::string> src4 = {"e0.gate.input_scale",    "e0.up.input_scale",   "e0.gate.weight_scale_2",
                                         "e0.up.weight_scale_2",   "e1.gate.input_scale", "e1.up.input_scale",
                                         "e1.gate.weight_scale_2", "e1.up.weight_scale_2"};
  std::vector<uint8_t> alpha =
      run(kNvfp4W13Alpha, DType::F32, {2, 4}, floats({0.5f, 0.75f, 0.125f, 0.125f, 2.0f, 1.0f, 3.0f, 3.0f}), {2}, src4);
  EXPECT_EQ(f32(alpha, 0), 0.09375f);  // max(0.5, 0.75) * 0.125
  EXPECT_EQ(f32(alpha, 1), 6.0f);      // max(2, 1) * 3
  const std::vector<std::string> src2 = {"a0", "b0", "a1", "b1"};
  std::vector<uint8_t> is = run(kNvfp4W13InputScale, DType::F32, {2, 2}, floats({0.5f, 0.75f, 2.0f, 1.0f}), {2}, src2);
  EXPECT_EQ(f32(is, 0), 0.75f);
  EXPECT_EQ(f32(is, 1), 2.0f);
  std::vector<uint8_t> s2 = run(kNvfp4W13Scale2, DType::F32, {2, 2}, floats({0.25f, 0.25f, 4.0f, 4.0f}), {2}, src2);
  EXPECT_EQ(f32(s2, 0), 0.25f);
  EXPECT_EQ(f32(s2, 1), 4.0f);
  std::vector<uint8_t> a2 = run(kNvfp4W2Alpha, DType::F32, {2, 2}, floats({0.5f, 0.25f, 3.0f, 0.5f}), {2}, src2);
  EXPECT_EQ(f32(a2, 0), 0.125f);
  EXPECT_EQ(f32(a2, 1), 1.5f);

  expect_error(
      [&] {
        run(kNvfp4W13Scale2, DType::F32, {2, 2}, floats({0.25f, 0.25f, 4.0f, 2.0f}), {2}, src2);
      },
      ErrorKind::Mismatch, {"storage 'test.storage'", "weight_scale_2 of 'a1' (4) differs from 'b1' (2)"});
  expect_error(
      [&] {
        run(kNvfp4W13Alpha, DType::F32, {2, 4}, floats({0.5f, 0.75f, 0.125f, 0.25f, 2.0f, 1.0f, 3.0f, 3.0f}), {2},
            src4);
      },
      ErrorKind::Mismatch, {"'e0.gate.weight_scale_2' (0.125) differs from 'e0.up.weight_scale_2' (0.25)"});
  expect_error(
      [&] {
        run(kNvfp4W2Alpha, DType::F32, {2, 3}, std::vector<uint8_t>(24), {2}, src2);
      },
      ErrorKind::Mismatch, {"gathered [2, 3] / runtime [2] must be [E, 2] / [E]"});
}

TEST(Nvfp4, Scale2MismatchThroughTheLoaderNamesBothTensors) {
  ModelProfile p = find_profile("kimi-tiny-nvfp4", kProfiles);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  std::map<std::string, std::vector<uint8_t>> canon;
  for (const TensorSpec& t : p.canonical_tensors()) canon[t.name] = floats({0.5f});
  const std::string ex = "language_model.model.layers.2.mlp.experts.3.";
  canon[ex + "up_proj.weight_scale_2"] = floats({0.25f});
  CanonicalLookup lookup = [&](const std::string& n) { return std::span<const uint8_t>(canon.at(n)); };
  for (const char* storage :
       {"model.layers.2.mlp.experts.w13_weight_scale_2", "model.layers.2.mlp.experts.w13_alpha"}) {
    const RuntimeStorageSpec& s = l[1].storages[l[1].index_of(storage)];
    std::vector<uint8_t> out(s.bytes());
    expect_error([&] { load_storage(s, lookup, out); }, ErrorKind::Mismatch,
                 {std::string("storage '") + storage + "'", "'" + ex + "gate_proj.weight_scale_2' (0.5)",
                  "'" + ex + "up_proj.weight_scale_2' (0.25)"});
  }
}

TEST(Mxfp4, HandComputedScaleOffsets) {
  EXPECT_EQ(mxfp4_scale_swizzled_shape(1, 256, 4), (Shape{1, 8, 128}));
  EXPECT_EQ(mxfp4_scale_swizzled_shape(128, 5760, 90), (Shape{128, 184, 2880}));  // gpt-oss w13: M 5888
  EXPECT_EQ(mxfp4_scale_swizzled_shape(8, 96, 3), (Shape{8, 8, 128}));
  const Shape r{1, 8, 128};  // Mp 256, Kp 4
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 0, 0), 0u);
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 8, 0), 1u);     // d: innermost
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 0, 1), 2u);     // g
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 1, 0), 4u);     // e
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 128, 0), 32u);  // b
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 0, 2), 64u);    // f: 2*8*2*2
  EXPECT_EQ(mxfp4_scale_offset(r, 0, 16, 0), 128u);  // c: (Kp/2) * 64
  // m = 445 = 256 + 128 + 3*16 + 8 + 5, k = 3 = 2 + 1 with Mp 512: ((((((1*8+3)*2+1)*2+1)*8+5)*2+1)*2+1
  EXPECT_EQ(mxfp4_scale_offset({1, 16, 128}, 0, 445, 3), 1527u);
  EXPECT_EQ(mxfp4_scale_offset({2, 16, 128}, 1, 0, 0), 2048u);  // expert stride Mp * Kp
  // Values: ((e*N + n)*Kb + k/32)*16 + (k%32)/2.
  EXPECT_EQ(mxfp4_value_offset({8, 128, 3, 16}, 2, 5, 70), 12563u);
}

TEST(Mxfp4, ScaleSwizzleMatchesTritonHopperLayout) {
  const int64_t e = 2, m = 300, k = 3, mp = 512, kp = 4;
  std::vector<uint8_t> in = codes(static_cast<size_t>(e * m * k), 3);
  const Shape runtime = mxfp4_scale_swizzled_shape(e, m, k);
  ASSERT_EQ(runtime, (Shape{2, 16, 128}));
  std::vector<uint8_t> out = run(kMxfp4ScaleSwizzle, DType::U8, {e, m, k}, in, runtime);
  // triton_kernels HopperMXScaleLayout.swizzle_data (num_warps 8): pad to (Mp, Kp), reshape(E, Mp/256, 2, 8, 2, 8,
  // Kp/2, 2), permute(0, 1, 3, 6, 2, 5, 7, 4) -- [0, 2, 5, 1, 4, 6, 3] shifted past the batch dim.
  std::vector<uint8_t> want =
      permute(pad3(in, e, m, k, mp, kp), {e, mp / 256, 2, 8, 2, 8, kp / 2, 2}, {0, 1, 3, 6, 2, 5, 7, 4});
  EXPECT_EQ(out, want);
  // A runtime larger than the gathered tensor (gpt_oss intermediate padding): the extra rows/columns are zero.
  const Shape wide_shape = mxfp4_scale_swizzled_shape(e, 600, 6);
  ASSERT_EQ(wide_shape, (Shape{2, 24, 192}));  // M 600 -> 768, K 6
  std::vector<uint8_t> wide = run(kMxfp4ScaleSwizzle, DType::U8, {e, m, k}, in, wide_shape);
  EXPECT_EQ(wide[mxfp4_scale_offset(wide_shape, 1, 299, 2)], in[static_cast<size_t>((m + 299) * k + 2)]);
  EXPECT_EQ(wide[mxfp4_scale_offset(wide_shape, 1, 300, 0)], 0);
  EXPECT_EQ(wide[mxfp4_scale_offset(wide_shape, 0, 0, 5)], 0);
  EXPECT_EQ(std::count(wide.begin(), wide.end(), 0), static_cast<long>(wide.size() - in.size()));
  expect_error(
      [&] {
        run(kMxfp4ScaleSwizzle, DType::U8, {e, m, k}, in, {2, 8, 128});
      },
      ErrorKind::Mismatch, {"transform 'mxfp4_scale_swizzle'", "runtime [2, 8, 128] cannot hold gathered [2, 300, 3]"});
}

TEST(Mxfp4, PadKeepsIndicesAndZeroesTheRest) {
  std::vector<uint8_t> in = codes(2 * 3 * 2 * 2, 4);  // BF16 [2, 3, 2]
  std::vector<uint8_t> out = run(kMxfp4Pad, DType::BF16, {2, 3, 2}, in, {2, 4, 3});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 3; ++c)
        for (int byte = 0; byte < 2; ++byte) {
          const uint8_t want = (b < 3 && c < 2) ? in[static_cast<size_t>(((a * 3 + b) * 2 + c) * 2 + byte)] : 0;
          EXPECT_EQ(out[static_cast<size_t>(((a * 4 + b) * 3 + c) * 2 + byte)], want) << a << b << c;
        }
  std::vector<uint8_t> same = run(kMxfp4Pad, DType::BF16, {2, 3, 2}, in, {2, 3, 2});
  EXPECT_EQ(same, in);
  std::vector<uint8_t> empty_rank = run(kMxfp4Pad, DType::U8, {2, 0, 4}, {}, {2, 3, 4});  // a rank with no blocks
  EXPECT_EQ(empty_rank, std::vector<uint8_t>(24, 0));
  expect_error(
      [&] {
        run(kMxfp4Pad, DType::BF16, {2, 3, 2}, in, {2, 2, 3});
      },
      ErrorKind::Mismatch, {"transform 'mxfp4_pad'", "runtime [2, 2, 3] does not contain gathered [2, 3, 2]"});
}

TEST(Transform, NamesAndUnknownTransform) {
  std::vector<std::string_view> names = transform_names();
  EXPECT_EQ(names.size(), 10u);
  EXPECT_EQ(names.front(), "none");
  for (std::string_view n : names) EXPECT_TRUE(is_known_transform(n)) << n;
  EXPECT_FALSE(is_known_transform("nvfp4_swizzle"));
  expect_error([] { run("fp8_transpose", DType::U8, {1}, {1}, {1}); }, ErrorKind::Format,
               {"storage 'test.storage': unknown post-load transform 'fp8_transpose'", "nvfp4_scale_swizzle"});
  RuntimeStorageSpec plain{"x.weight", DType::BF16, {4}, {}, "none", {4}};
  expect_error([&] { weight_element(plain, 0, 0, 0); }, ErrorKind::Format, {"storage 'x.weight'", "weight element"});
  expect_error([&] { scale_element(plain, 0, 0, 0); }, ErrorKind::Format, {"storage 'x.weight'", "scale element"});
}

/// Canonical bytes of a profile: codes per tensor and `version`, except NVFP4 scalars (weight_scale_2 equal per
/// gate/up pair, as the w13 transforms require).
std::map<std::string, std::vector<uint8_t>> canonical(const ModelProfile& p, uint32_t version) {
  std::map<std::string, std::vector<uint8_t>> c;
  uint32_t t = 0;
  for (const TensorSpec& s : p.canonical_tensors()) {
    ++t;
    const bool scalar = s.shape.empty();
    c[s.name] = scalar ? floats({0.5f * static_cast<float>(version)}) : codes(s.bytes(), t * 7919u + version);
  }
  return c;
}

TEST(Transform, ReloadsAreIdenticalThroughLoadStorage) {
  for (const char* id : {"glm-tiny-fp8", "kimi-tiny-nvfp4", "gpt-oss-tiny-mxfp4"}) {
    ModelProfile p = find_profile(id, kProfiles);
    const auto v1 = canonical(p, 1), v2 = canonical(p, 2);
    auto lookup = [](const std::map<std::string, std::vector<uint8_t>>& c) -> CanonicalLookup {
      return [&c](const std::string& n) { return std::span<const uint8_t>(c.at(n)); };
    };
    for (int tp : {2, 4}) {
      size_t transformed = 0;
      for (const RankLayout& layout : build_rank_layouts(p, tp))
        for (const RuntimeStorageSpec& s : layout.storages) {
          if (s.transform == "none") continue;
          ++transformed;
          std::vector<uint8_t> fresh(s.bytes(), 0);
          load_storage(s, lookup(v1), fresh);
          std::vector<uint8_t> reused = fresh;
          load_storage(s, lookup(v1), reused);  // second load
          EXPECT_EQ(reused, fresh) << s.name;
          load_storage(s, lookup(v1), reused);  // third load
          EXPECT_EQ(reused, fresh) << s.name;
          std::vector<uint8_t> dirty(s.bytes(), 0xA5);
          load_storage(s, lookup(v1), dirty);
          EXPECT_EQ(dirty, fresh) << s.name;
          std::vector<uint8_t> other(s.bytes(), 0);
          load_storage(s, lookup(v2), other);  // a buffer holding another version
          EXPECT_NE(other, fresh) << s.name;
          load_storage(s, lookup(v1), other);
          EXPECT_EQ(other, fresh) << s.name << " tp=" << tp << " rank " << layout.rank;
        }
      EXPECT_GT(transformed, 0u) << id;
    }
  }
}

}  // namespace
}  // namespace wsb
