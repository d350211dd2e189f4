// Deterministic synthetic weights: a pure function of (profile, seed, version, density) per tensor, computed
// element by element from counter-based hashes so any tensor can be produced alone, in any order, on any host.
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "modes/publisher/publisher.hpp"

namespace wsb {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // splitmix64 increment (Steele, Lea, Flood 2014)
constexpr uint64_t kValueTag = 0x7773622D76616C30ull;   // separates the v0 value streams ...
constexpr uint64_t kSelectTag = 0x7773622D73656C31ull;  // ... from the per-version selection streams

/// splitmix64 output function: a bijective 64-bit mixer.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t combine(uint64_t key, uint64_t value) { return mix64(key ^ mix64(value + kGamma)); }

/// FNV-1a 64: a stable hash of names (std::hash is not specified across implementations).
uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

/// The model's identity without scaling knobs ("llama-3.1-8b-bf16@layers=2" -> "llama-3.1-8b-bf16"), so a scaled
/// run holds the very same values as the full model in the layers it keeps.
uint64_t profile_key(const ModelProfile& profile) {
  std::string_view id = profile.id;
  return fnv1a(id.substr(0, id.find('@')));
}

/// Element i of the counter-based stream `key` (splitmix64 at position i + 1).
inline uint64_t stream_at(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * kGamma); }

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
  if (tensor.shape.size() >= 2 && tensor.shape.back() > 0) {
    return {0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(tensor.shape.back())))};
  }
  return {0.0f, 0.02f};
}

/// Draws the n values of stream `key` in `range` and hands (index, value) to `store`. One 64-bit draw yields two
/// disjoint 24-bit uniforms: element 2j from bits 40..63, element 2j + 1 from bits 8..31.
template <typename StoreFn>
void fill_pairs(uint64_t n, uint64_t key, InitRange range, StoreFn store) {
  auto value = [range](uint64_t bits24) {
    float u = static_cast<float>(bits24) * 0x1p-24f;  // exact, in [0, 1)
    return range.center + range.half_width * (2.0f * u - 1.0f);
  };
  for (uint64_t j = 0; j < n / 2; ++j) {
    uint64_t h = stream_at(key, j);
    store(2 * j, value(h >> 40));
    store(2 * j + 1, value((h >> 8) & 0xFFFFFFu));
  }
  if (n % 2 == 1) store(n - 1, value(stream_at(key, n / 2) >> 40));
}

void check_out(const TensorSpec& tensor, std::span<const uint8_t> out) {
  if (out.size() != tensor.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' ({} {}): buffer of {} bytes, expected {}", tensor.name,
                                                 dtype_name(tensor.dtype), shape_string(tensor.shape), out.size(),
                                                 tensor.bytes()));
  }
}

[[noreturn]] void unsupported(const TensorSpec& tensor) {
  throw Error(ErrorKind::Format, fmt::format("publisher: tensor '{}' has dtype {}, which has no synthesis / "
                                             "perturbation rule (BF16, F16, F32 supported)",
                                             tensor.name, dtype_name(tensor.dtype)));
}

}  // namespace

double default_density(DType dtype) {
  switch (dtype) {
    case DType::BF16:
    case DType::F16:
    case DType::F32:
      return 0.01;
    // Quantized codes (issue 3): F8_E4M3 0.006, FP4 (E2M1 packed in U8) 0.003, with their own code-step rules.
    default:
      throw Error(ErrorKind::Format,
                  fmt::format("publisher: no default perturbation density for dtype {}", dtype_name(dtype)));
  }
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
  const uint64_t key = combine(combine(combine(kValueTag, profile_key(profile)), seed), fnv1a(tensor.name));
  const InitRange range = init_range(tensor);
  const uint64_t n = tensor.numel();
  uint8_t* p = out.data();
  switch (tensor.dtype) {
    case DType::BF16:
      return fill_pairs(n, key, range, [p](uint64_t i, float v) {
        uint16_t code = finite_to_bf16(v);
        p[2 * i] = static_cast<uint8_t>(code);  // safetensors stores little-endian
        p[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      });
    case DType::F16:
      return fill_pairs(n, key, range, [p](uint64_t i, float v) {
        uint16_t code = float_to_f16(v);
        p[2 * i] = static_cast<uint8_t>(code);
        p[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      });
    case DType::F32:
      return fill_pairs(n, key, range, [p](uint64_t i, float v) {
        uint32_t code = std::bit_cast<uint32_t>(v);
        for (int b = 0; b < 4; ++b) p[4 * i + b] = static_cast<uint8_t>(code >> (8 * b));
      });
    default:
      unsupported(tensor);
  }
}

uint64_t perturb_version(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                         double density, std::span<uint8_t> data) {
  check_out(tensor, data);
  if (!(density >= 0.0 && density <= 1.0)) {
    throw Error(ErrorKind::Format,
                fmt::format("publisher: density {} for tensor '{}' is not in [0, 1]", density, tensor.name));
  }
  if (tensor.dtype != DType::BF16 && tensor.dtype != DType::F16 && tensor.dtype != DType::F32) unsupported(tensor);
  // Lowest bit of the stored code = lowest mantissa bit: the exponent is untouched, so finite stays finite.
  // In little-endian storage it is bit 0 of the element's first byte.
  const size_t stride = dtype_size(tensor.dtype);
  const uint64_t n = tensor.numel();
  const uint64_t key = combine(combine(combine(combine(kSelectTag, profile_key(profile)), seed), version),
                               fnv1a(selection_group(tensor.name)));
  // One 64-bit draw decides two elements: 2j by its high 32 bits, 2j + 1 by its low 32 bits (2^-32 resolution).
  const double scaled = std::ldexp(density, 32);
  const bool all = scaled >= 0x1p32;
  const uint32_t threshold = all ? 0 : static_cast<uint32_t>(scaled);
  uint8_t* p = data.data();
  uint64_t moved = 0;
  auto visit = [&](uint64_t i, uint32_t draw) {
    if (all || draw < threshold) {
      p[i * stride] ^= 1u;
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

void synthesize_canonical(const ModelProfile& profile, const TensorSpec& tensor, uint64_t seed, uint32_t version,
                          std::optional<double> density, std::span<uint8_t> out) {
  synthesize_initial(profile, tensor, seed, out);
  if (version == 0) return;
  const double d = density ? *density : default_density(tensor.dtype);
  for (uint32_t k = 1; k <= version; ++k) perturb_version(profile, tensor, seed, k, d, out);
}

}  // namespace wsb
