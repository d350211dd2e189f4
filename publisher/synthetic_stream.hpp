#pragma once
// Internal to the publisher: the counter-based hash streams that make synthetic weights a pure function of
// (profile, seed, version, tensor, element), and the per-code-format value synthesis of quantized tensors.
#include <cstdint>
#include <span>
#include <string_view>

#include "models/profile/profile.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb::synth {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;      // splitmix64 increment (Steele, Lea, Flood 2014)
inline constexpr uint64_t kValueTag = 0x7773622D76616C30ull;   // separates the v0 value streams ...
inline constexpr uint64_t kSelectTag = 0x7773622D73656C31ull;  // ... from the per-version selection streams

/// splitmix64 output function: a bijective 64-bit mixer.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t combine(uint64_t key, uint64_t value) { return mix64(key ^ mix64(value + kGamma)); }

/// FNV-1a 64: a stable hash of names (std::hash is not specified across implementations).
constexpr uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

/// The model's identity without scaling knobs ("llama-3.1-8b-bf16@layers=2" -> "llama-3.1-8b-bf16"), so a scaled
/// run holds the very same values as the full model in the layers it keeps.
inline uint64_t profile_key(const ModelProfile& profile) {
  std::string_view id = profile.id;
  return fnv1a(id.substr(0, id.find('@')));
}

/// Element i of the counter-based stream `key` (splitmix64 at position i + 1).
inline uint64_t stream_at(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * kGamma); }

/// Hands `store(i, u)` a uniform u in [0, 1) (24 bits, exact in float) for every element i < n of stream `key`.
/// One 64-bit draw yields two disjoint 24-bit uniforms: element 2j from bits 40..63, element 2j + 1 from bits
/// 8..31.
template <typename StoreFn>
void for_each_uniform(uint64_t n, uint64_t key, StoreFn store) {
  auto uniform = [](uint64_t bits24) { return static_cast<float>(bits24) * 0x1p-24f; };
  for (uint64_t j = 0; j < n / 2; ++j) {
    uint64_t h = stream_at(key, j);
    store(2 * j, uniform(h >> 40));
    store(2 * j + 1, uniform((h >> 8) & 0xFFFFFFu));
  }
  if (n % 2 == 1) store(n - 1, uniform(stream_at(key, n / 2) >> 40));
}

/// Version-0 codes of a tensor whose code format is E4M3, packed E2M1 or E8M0 (the quantized parts), from the
/// value stream `key`. The value rules are documented at synthesize_initial (publisher.hpp).
/// Throws Error(Format) naming the tensor for a code format without a rule.
void synthesize_quantized(const TensorSpec& tensor, const QuantRole& role, uint64_t key, std::span<uint8_t> out);

/// Float value of element i of an IEEE-coded quantization scale (ChannelScale, BlockScale, GlobalScale,
/// InputScale) given its uniform u in [0, 1); see synthesize_initial (publisher.hpp) for the rules.
float scale_value(const ModelProfile& profile, const QuantRole& role, float u);

}  // namespace wsb::synth
