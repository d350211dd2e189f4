// Deterministic synthetic weights: a pure function of (profile, seed, version, density) per tensor, computed
// element by element from counter-based hashes so any tensor can be produced alone, in any order, on any host.
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/quant/code_step.hpp"
#include "models/quant/quant_role.hpp"
#include "publisher/publisher.hpp"
#include "publisher/synthetic_stream.hpp"

namespace wsb {
namespace {

using synth::combine;
using synth::fnv1a;
using synth::kSelectTag;
using synth::kValueTag;
using synth::profile_key;
using synth::stream_at;

/// Round-to-nearest-even float -> BF16 of a finite value (synthetic values are always finite).
inline uint16_t finite_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

/// Round-to-nearest-even float -> IEEE binary16 (subnormals included; overflow to infinity).
uint16_t float_to_f16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xFFu;
  uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mantissa ? 0x200u : 0u));
  int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  uint32_t half = 0;
  uint32_t rest = 0;
  uint32_t halfway = 0;
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    uint32_t full = mantissa | 0x800000u;
    int shift = 14 - e;  // value = full * 2^(exponent - 150) = half * 2^-24
    half = full >> shift;
    rest = full & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  } else {
    half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
    rest = mantissa & 0x1FFFu;
    halfway = 0x1000u;
  }
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;  // a carry correctly bumps the exponent
  return static_cast<uint16_t>(sign | half);
}

struct InitRange {
  float center = 0.0f;
  float half_width = 0.0f;
};

/// Ranges chosen so a forward pass over many layers stays sane: Linear weights like PyTorch's default
/// initialisation bound 1/sqrt(fan_in), RMSNorm gains near 1, embeddings O(1) (normalised before use).
InitRange init_range(const TensorSpec& tensor) {
  std::string_view name = tensor.name;
  if (name.ends_with("norm.weight")) return {1.0f, 0.05f};
  if (name.find("embed_tokens") != std::string_view::npos) return {0.0f, 0.5f};
  // gpt-oss BF16 stacked experts are [E, in, out] (transformers GptOssExperts: x @ W), so the fan-in is dim 1.
  if (tensor.shape.size() == 3 && tensor.shape[1] > 0 &&
      (name.ends_with(".experts.gate_up_proj") || name.ends_with(".experts.down_proj"))) {
    return {0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(tensor.shape[1])))};
  }
  if (tensor.shape.size() >= 2 && tensor.shape.back() > 0) {
    return {0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(tensor.shape.back())))};
  }
  return {0.0f, 0.02f};
}

/// Writes value(u) for every element of an IEEE-coded tensor (BF16, F16 or F32; little-endian codes, as
/// safetensors stores them), u being the element's uniform draw of stream `key`. The dtype is dispatched once,
/// outside the element loop.
template <typename ValueFn>
void fill_ieee(const TensorSpec& tensor, uint64_t key, uint8_t* p, ValueFn value) {
  const uint64_t n = tensor.numel();
  switch (tensor.dtype) {
    case DType::BF16:
      return synth::for_each_uniform(n, key, [&](uint64_t i, float u) {
        uint16_t code = finite_to_bf16(value(u));
        p[2 * i] = static_cast<uint8_t>(code);
        p[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      });
    case DType::F16:
      return synth::for_each_uniform(n, key, [&](uint64_t i, float u) {
        uint16_t code = float_to_f16(value(u));
        p[2 * i] = static_cast<uint8_t>(code);
        p[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      });
    default:  // F32, the only other IEEE dtype with a rule (has_rule)
      return synth::for_each_uniform(n, key, [&](uint64_t i, float u) {
        uint32_t code = std::bit_cast<uint32_t>(value(u));
        for (int b = 0; b < 4; ++b) p[4 * i + b] = static_cast<uint8_t>(code >> (8 * b));
      });
  }
}

void check_out(const TensorSpec& tensor, std::span<const uint8_t> out) {
  if (out.size() != tensor.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' ({} {}): buffer of {} bytes, expected {}", tensor.name,
                                                 dtype_name(tensor.dtype), shape_string(tensor.shape), out.size(),
                                                 tensor.bytes()));
  }
}

/// True when the publisher has a synthesis and step rule for the tensor's codes.
bool has_rule(const TensorSpec& tensor, const QuantRole& role) {
  switch (role.format) {
    case CodeFormat::Ieee:
      return tensor.dtype == DType::BF16 || tensor.dtype == DType::F16 || tensor.dtype == DType::F32;
    case CodeFormat::E4M3:
    case CodeFormat::E2M1x2:
    case CodeFormat::E8M0:
      return true;
    case CodeFormat::None:
    case CodeFormat::E5M2:
      return false;
  }
  return false;
}

[[noreturn]] void unsupported(const TensorSpec& tensor) {
  throw Error(ErrorKind::Format,
              fmt::format("publisher: tensor '{}' has dtype {}, which has no synthesis / perturbation rule "
                          "(BF16, F16, F32, F8_E4M3, F8_E8M0, and U8 named '*.weight' / '*_blocks' (packed E2M1) "
                          "or '*_scales' (E8M0) are supported)",
                          tensor.name, dtype_name(tensor.dtype)));
}

/// Name prefixes a profile declares immutable: the optional string array "immutable_prefixes" of its JSON.
bool has_immutable_prefix(const ModelProfile& profile, std::string_view name) {
  const auto it = profile.raw.find("immutable_prefixes");
  if (it == profile.raw.end() || !it->is_array()) return false;
  for (const auto& prefix : *it) {
    if (prefix.is_string() && name.starts_with(prefix.get_ref<const std::string&>())) return true;
  }
  return false;
}

/// Runs `step(i)` on every element i < n selected with probability `density` by the selection stream `key`.
/// One 64-bit draw decides two elements: 2j by its high 32 bits, 2j + 1 by its low 32 bits (2^-32 resolution).
template <typename StepFn>
uint64_t select_elements(uint64_t n, uint64_t key, double density, StepFn step) {
  const double scaled = std::ldexp(density, 32);
  const bool all = scaled >= 0x1p32;
  const uint32_t threshold = all ? 0 : static_cast<uint32_t>(scaled);
  uint64_t moved = 0;
  auto visit = [&](uint64_t i, uint32_t draw) {
    if (all || draw < threshold) {
      step(i);
      ++moved;
    }
  };
  for (uint64_t j = 0; j < n / 2; ++j) {
    uint64_t h = stream_at(key, j);
    visit(2 * j, static_cast<uint32_t>(h >> 32));
    visit(2 * j + 1, static_cast<uint32_t>(h));
  }
  if (n % 2 == 1) visit(n - 1, static_cast<uint32_t>(stream_at(key, n / 2) >> 32));
  return moved;
}

}  // namespace

double default_density(DType dtype) {
  switch (dtype) {
    case DType::BF16:
    case DType::F16:
    case DType::F32:
      return 0.01;
    case DType::F8_E4M3:
      return 0.006;
    case DType::U8:  // packed E2M1 or E8M0 scales: the FP4 formats
    case DType::F8_E8M0:
      return 0.003;
    default:
      throw Error(ErrorKind::Format,
                  fmt::format("publisher: no default perturbation density for dtype {}", dtype_name(dtype)));
  }
}

double default_density(const TensorSpec& tensor) {
  const QuantRole role = quant_role(tensor);
  if (!has_rule(tensor, role)) {
    throw Error(ErrorKind::Format, fmt::format("publisher: no default perturbation density for tensor '{}' (dtype {})",
                                               tensor.name, dtype_name(tensor.dtype)));
  }
  if (role.part == QuantPart::InputScale) return 0.0;
  switch (role.method) {
    case QuantMethod::Fp8:
      return 0.006;
    case QuantMethod::Nvfp4:
    case QuantMethod::Mxfp4:
      return 0.003;
    case QuantMethod::None:
      break;
  }
  return default_density(tensor.dtype);
}

bool is_immutable(const ModelProfile& profile, const TensorSpec& tensor) {
  return quant_role(tensor).part == QuantPart::InputScale || has_immutable_prefix(profile, tensor.name);
}

std::string selection_group(std::string_view tensor_name) {
  std::string group(tensor_name);
  for (std::string_view half : {std::string_view(".gate_proj."), std::string_view(".up_proj.")}) {
    size_t at = group.find(half);
    if (at != std::string::npos) {
      group.replace(at, half.size(), ".gate_up_proj.");
      break;
    }
  }
  return group;
}

void synthesize_initial(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed,
                        std::span<uint8_t> out) {
  check_out(tensor, out);
  const QuantRole role = quant_role(tensor);
  if (!has_rule(tensor, role)) unsupported(tensor);
  const uint64_t key = combine(combine(combine(kValueTag, profile_key(profile)), seed), fnv1a(tensor.name));
  if (role.format != CodeFormat::Ieee) return synth::synthesize_quantized(tensor, role, key, out);
  if (role.part != QuantPart::Plain) {
    return fill_ieee(tensor, key, out.data(), [&](float u) { return synth::scale_value(profile, role, u); });
  }
  const InitRange range = init_range(tensor);
  fill_ieee(tensor, key, out.data(), [range](float u) { return range.center + range.half_width * (2.0f * u - 1.0f); });
}

uint64_t perturb_version(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                         double density, std::span<uint8_t> data) {
  check_out(tensor, data);
  if (!(density >= 0.0 && density <= 1.0)) {
    throw Error(ErrorKind::Format,
                fmt::format("publisher: density {} for tensor '{}' is not in [0, 1]", density, tensor.name));
  }
  const QuantRole role = quant_role(tensor);
  if (!has_rule(tensor, role)) unsupported(tensor);
  if (is_immutable(profile, tensor)) return 0;
  const uint64_t key = combine(combine(combine(combine(kSelectTag, profile_key(profile)), seed), version),
                               fnv1a(selection_group(tensor.name)));
  const uint64_t n = code_count(tensor, role);
  uint8_t* p = data.data();
  switch (role.format) {
    case CodeFormat::Ieee: {
      // Lowest bit of the stored code = lowest mantissa bit: the exponent is untouched, so finite stays finite.
      // In little-endian storage it is bit 0 of the element's first byte.
      const size_t stride = dtype_size(tensor.dtype);
      return select_elements(n, key, density, [p, stride](uint64_t i) { p[i * stride] ^= 1u; });
    }
    case CodeFormat::E4M3:
      return select_elements(n, key, density, [p](uint64_t i) { p[i] = e4m3_step(p[i]); });
    case CodeFormat::E2M1x2:
      // Element 2k is the low nibble of byte k; flipping the nibble's bit 0 is e2m1_step (magnitude +-1).
      return select_elements(n, key, density, [p](uint64_t i) { p[i / 2] ^= (i % 2) ? 0x10 : 0x01; });
    case CodeFormat::E8M0:
      return select_elements(n, key, density, [p](uint64_t i) { p[i] = e8m0_step(p[i]); });
    default:
      unsupported(tensor);
  }
}

void synthesize_canonical(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                          std::optional<double> density, std::span<uint8_t> out) {
  synthesize_initial(profile, tensor, seed, out);
  if (version == 0) return;
  const double d = density ? *density : default_density(tensor);
  for (uint32_t k = 1; k <= version; ++k) perturb_version(profile, tensor, seed, k, d, out);
}

}  // namespace wsb
