// Version-0 values of quantized tensors: codes whose dequantized weights look like the unquantized synthetic
// ones (about U(-1/sqrt(in), 1/sqrt(in))), so a forward pass through many layers stays finite and sane.
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/quant/codecs.hpp"
#include "publisher/synthetic_stream.hpp"

namespace wsb::synth {
namespace {

/// Fan-in of a block-scaled weight from its scale tensor: the last dimension counts blocks of `block` elements
/// (NVFP4 weight_scale [N, K/16], MXFP4 *_scales [.., K/32]; models-and-formats.md).
double block_fan_in(const TensorSpec& tensor, int block) {
  const int64_t last = tensor.shape.empty() ? 1 : tensor.shape.back();
  return static_cast<double>(last > 0 ? last : 1) * block;
}

// NVFP4 scale chain: w = e2m1 * block_scale(E4M3) * weight_scale_2. weight_scale_2 is the fixed kNvfp4Global, so
// block scales of about 1 / (6 * sqrt(K) * kNvfp4Global) put the largest code (6) near 1/sqrt(K).
constexpr float kNvfp4Global = 0x1p-11f;
constexpr float kInputScale = 0x1p-8f;  // activations up to 448 * 6 * 2^-8 = 10.5 fit NVFP4 block scales

void synthesize_e4m3(const TensorSpec& tensor, const QuantRole& role, uint64_t key, std::span<uint8_t> out) {
  uint8_t* p = out.data();
  if (role.part == QuantPart::BlockScale) {
    // NVFP4 block scales: a narrow E4M3 range, U(0.75, 1.25) / (6 sqrt(K) weight_scale_2), K = 16 * last dim.
    const float center = static_cast<float>(1.0 / (6.0 * std::sqrt(block_fan_in(tensor, 16)) * kNvfp4Global));
    return for_each_uniform(tensor.numel(), key, [p, center](uint64_t i, float u) {
      const float v = std::fmin(std::fmax(center * (0.75f + 0.5f * u), 0x1p-6f), kE4M3Max);
      p[i] = float_to_e4m3(v);
    });
  }
  // FP8 weights (and any other E4M3 tensor): uniform over the whole finite range, as per-channel quantization
  // maps each row's amax to 448; RNE never reaches NaN since |v| <= 448.
  return for_each_uniform(tensor.numel(), key,
                          [p](uint64_t i, float u) { p[i] = float_to_e4m3(kE4M3Max * (2.0f * u - 1.0f)); });
}

void synthesize_e2m1x2(const TensorSpec& tensor, uint64_t key, std::span<uint8_t> out) {
  // Every E2M1 code is valid and the scales carry the magnitude: uniform random nibbles, 8 bytes per draw.
  const uint64_t n = tensor.numel();
  uint8_t* p = out.data();
  for (uint64_t j = 0; j * 8 < n; ++j) {
    const uint64_t h = stream_at(key, j);
    for (uint64_t b = 0; b < 8 && j * 8 + b < n; ++b) p[j * 8 + b] = static_cast<uint8_t>(h >> (8 * b));
  }
}

void synthesize_e8m0(const TensorSpec& tensor, uint64_t key, std::span<uint8_t> out) {
  // MXFP4 scales 2^(e0 - d), d in {0, 1} per block, e0 = round(log2(1 / (6 sqrt(K)))) with K = 32 * last dim:
  // the largest E2M1 code (6) times the scale lands near 1/sqrt(K) (gpt-oss, K = 2880: 2^-9 and 2^-8).
  const double fan_in = block_fan_in(tensor, 32);
  const int e0 = static_cast<int>(std::lround(std::log2(1.0 / (6.0 * std::sqrt(fan_in)))));
  const int top = std::min(std::max(e0 + kE8M0Bias, 1), 0xFD);  // stays clear of 0 and of the NaN code
  uint8_t* p = out.data();
  for_each_uniform(tensor.numel(), key,
                   [p, top](uint64_t i, float u) { p[i] = static_cast<uint8_t>(u < 0.5f ? top - 1 : top); });
}

}  // namespace

void synthesize_quantized(const TensorSpec& tensor, const QuantRole& role, uint64_t key, std::span<uint8_t> out) {
  switch (role.format) {
    case CodeFormat::E4M3:
      return synthesize_e4m3(tensor, role, key, out);
    case CodeFormat::E2M1x2:
      return synthesize_e2m1x2(tensor, key, out);
    case CodeFormat::E8M0:
      return synthesize_e8m0(tensor, key, out);
    default:
      throw Error(ErrorKind::Format, fmt::format("publisher: tensor '{}' ({}) has no quantized synthesis rule",
                                                 tensor.name, dtype_name(tensor.dtype)));
  }
}

float scale_value(const ModelProfile& profile, const QuantRole& role, float u) {
  switch (role.part) {
    case QuantPart::InputScale:
      return kInputScale;
    case QuantPart::GlobalScale:
      // A constant: gate and up weight_scale_2 of one expert must be equal (the fused w13 kernel has one).
      return kNvfp4Global;
    case QuantPart::ChannelScale:
    case QuantPart::BlockScale: {
      // FP8 scale of codes spanning +-448: U(0.75, 1.25) / (448 sqrt(hidden)). An [out, 1] scale does not show
      // its weight's fan-in, so the model's hidden size stands in for it (GLM-4.5-Air: the true fan-in is within
      // a factor 3 of it for every projection, so dequantized weights stay within sqrt(3) of 1/sqrt(in)).
      const double hidden = profile.dims.hidden > 0 ? profile.dims.hidden : 1;
      return static_cast<float>((0.75 + 0.5 * u) / (kE4M3Max * std::sqrt(hidden)));
    }
    case QuantPart::Plain:
    case QuantPart::Weight:
      break;
  }
  return 0.0f;
}

}  // namespace wsb::synth
