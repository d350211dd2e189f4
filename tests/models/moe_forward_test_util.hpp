#pragma once
// Helpers of the forward-pass tests: valid synthetic canonical weights for the quantized tiny profiles (the
// publisher lives in a higher layer), rank images loaded with the ordinary loader (every family), and runs of a
// forward model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/numeric.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "models/quant/codecs.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb::test {

inline const std::vector<std::string> kMoeTinyProfiles = {"glm-tiny-fp8",   "glm-tiny-bf16",      "kimi-tiny-nvfp4",
                                                          "kimi-tiny-bf16", "gpt-oss-tiny-mxfp4", "gpt-oss-tiny-bf16"};

inline ModelProfile moe_profile(const std::string& id) { return find_profile(id, WSBENCH_PROFILES_DIR); }

/// Uniform draws in [0, 1) of a 64-bit LCG seeded from the tensor name (FNV-1a), so each tensor is deterministic.
class Draws {
 public:
  explicit Draws(const std::string& name, uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull) {
    for (unsigned char c : name) state_ = (state_ ^ c) * 0x100000001B3ull;
  }
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1ull << 24);
  }
  uint8_t byte() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint8_t>(state_ >> 56);
  }

 private:
  uint64_t state_;
};

/// Stores float v as one element of dtype at element index i.
inline void put_float(std::vector<uint8_t>& b, DType dtype, uint64_t i, float v) {
  if (dtype == DType::BF16) {
    const uint16_t code = float_to_bf16(v);
    std::memcpy(&b[i * 2], &code, 2);
  } else if (dtype == DType::F32) {
    std::memcpy(&b[i * 4], &v, 4);
  } else {
    throw Error(ErrorKind::Format, "moe test weights: unsupported dtype " + std::string(dtype_name(dtype)));
  }
}

/// Valid canonical bytes of one tensor, by quant_role, with magnitudes like the publisher's (dequantized weights
/// about U(-1/sqrt(in), 1/sqrt(in))): FP8 codes over the finite range with channel scales 1/(448 sqrt(hidden));
/// NVFP4 random nibbles, E4M3 block scales around 1/(6 sqrt(K) 2^-11), weight_scale_2 2^-11, input_scale 2^-8;
/// MXFP4 random nibbles, E8M0 scales 2^(round(log2(1/(6 sqrt(K)))) - {0, 1}); norms 1 +- 0.05; embeddings
/// U(-0.5, 0.5); routers' correction bias U(0, 0.2); sinks U(-1, 1); other vectors U(-0.02, 0.02).
inline std::vector<uint8_t> synth_tensor(const ModelProfile& p, const TensorSpec& t, uint64_t seed) {
  const QuantRole role = quant_role(t);
  std::vector<uint8_t> b(t.bytes());
  Draws u(t.name, seed);
  const uint64_t n = t.numel();
  const double last = t.shape.empty() ? 1.0 : static_cast<double>(t.shape.back());
  switch (role.format) {
    case CodeFormat::E4M3:
      if (role.part == QuantPart::BlockScale) {
        const float center = static_cast<float>(1.0 / (6.0 * std::sqrt(16.0 * last) * 0x1p-11));
        for (uint64_t i = 0; i < n; ++i) b[i] = float_to_e4m3(center * (0.75f + 0.5f * u.next()));
      } else {
        for (uint64_t i = 0; i < n; ++i) b[i] = float_to_e4m3(kE4M3Max * (2.0f * u.next() - 1.0f));
      }
      return b;
    case CodeFormat::E2M1x2:
      for (uint64_t i = 0; i < n; ++i) b[i] = u.byte();
      return b;
    case CodeFormat::E8M0: {
      const int top = static_cast<int>(std::lround(std::log2(1.0 / (6.0 * std::sqrt(32.0 * last))))) + kE8M0Bias;
      for (uint64_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(u.next() < 0.5f ? top - 1 : top);
      return b;
    }
    default:
      break;
  }
  const std::string& name = t.name;
  auto fill = [&](const std::function<float(float)>& f) {
    for (uint64_t i = 0; i < n; ++i) put_float(b, t.dtype, i, f(u.next()));
  };
  // gpt-oss BF16 stacked experts are [E, in, out] (x @ W): their fan-in is dim 1, not the last dim.
  const bool in_out = t.shape.size() == 3 && (name.ends_with(".experts.gate_up_proj") ||
                                               name.ends_with(".experts.down_proj"));
  const float fan = static_cast<float>(1.0 / std::sqrt(in_out ? static_cast<double>(t.shape[1]) : last));
  const float hidden = static_cast<float>(p.dims.hidden);
  switch (role.part) {
    case QuantPart::ChannelScale:
      fill([&](float v) { return (0.75f + 0.5f * v) / (448.0f * std::sqrt(hidden)); });
      break;
    case QuantPart::GlobalScale:
      fill([](float) { return 0x1p-11f; });
      break;
    case QuantPart::InputScale:
      fill([](float) { return 0x1p-8f; });
      break;
    default:
      if (name.ends_with("norm.weight")) {
        fill([](float v) { return 1.0f + 0.1f * (v - 0.5f); });
      } else if (name.find("embed_tokens") != std::string::npos) {
        fill([](float v) { return v - 0.5f; });
      } else if (name.ends_with("e_score_correction_bias")) {
        fill([](float v) { return 0.2f * v; });
      } else if (name.ends_with("sinks")) {
        fill([](float v) { return 2.0f * v - 1.0f; });
      } else if (t.shape.size() >= 2 && !name.ends_with("_bias")) {
        fill([fan](float v) { return fan * (2.0f * v - 1.0f); });
      } else {
        fill([](float v) { return 0.04f * (v - 0.5f); });
      }
  }
  return b;
}

/// Canonical checkpoint of a profile, by tensor name.
inline std::map<std::string, std::vector<uint8_t>> synth_checkpoint(const ModelProfile& p, uint64_t seed = 1) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const TensorSpec& t : p.canonical_tensors()) out[t.name] = synth_tensor(p, t, seed);
  return out;
}

/// Runtime storages of every rank, loaded with the ordinary loader (shard, fuse, post-load transform).
struct RankImages {
  std::vector<RankLayout> layouts;
  std::vector<std::vector<std::vector<uint8_t>>> bytes;  // [rank][storage]

  RankImages(const ModelProfile& p, int tp, const CanonicalLookup& canonical) : layouts(build_rank_layouts(p, tp)) {
    for (const RankLayout& l : layouts) {
      bytes.emplace_back();
      for (const RuntimeStorageSpec& s : l.storages) {
        bytes.back().emplace_back(s.bytes());
        load_storage(s, canonical, bytes.back().back());
      }
    }
  }
  std::vector<RankStorageView> views() const {
    std::vector<RankStorageView> v(bytes.size());
    for (size_t r = 0; r < bytes.size(); ++r)
      for (const auto& b : bytes[r]) v[r].storages.emplace_back(b);
    return v;
  }
  const RuntimeStorageSpec& spec(int rank, const std::string& name) const {
    const RankLayout& l = layouts[static_cast<size_t>(rank)];
    return l.storages[l.index_of(name)];
  }
  std::vector<uint8_t>& storage(int rank, const std::string& name) {
    return bytes[static_cast<size_t>(rank)][layouts[static_cast<size_t>(rank)].index_of(name)];
  }
};

using Logits = std::vector<std::vector<float>>;

/// Logits of every step of one sequence fed `tokens`.
inline Logits run_tokens(const ForwardModel& model, const std::vector<int32_t>& tokens) {
  auto seq = model.new_sequence();
  Logits all;
  for (int32_t t : tokens) {
    all.emplace_back();
    model.step(*seq, t, all.back());
  }
  return all;
}

inline bool bitwise_equal(const Logits& a, const Logits& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

/// What the engine's probe fingerprint speaks about (engine/generation.hpp), computed here without the engine:
/// greedy decoding of `new_tokens` after `prompt`, recording each chosen id and the bits of its float32 logprob.
struct Greedy {
  std::vector<int32_t> ids;
  std::vector<uint32_t> logprob_bits;
  bool operator==(const Greedy&) const = default;
};

inline Greedy greedy(const ForwardModel& model, const std::vector<int32_t>& prompt, int new_tokens) {
  auto seq = model.new_sequence();
  std::vector<float> logits;
  for (int32_t t : prompt) model.step(*seq, t, logits);
  Greedy g;
  for (int i = 0; i < new_tokens; ++i) {
    size_t best = 0;
    for (size_t v = 1; v < logits.size(); ++v)
      if (logits[v] > logits[best]) best = v;
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - logits[best]);
    const float logprob = static_cast<float>(-std::log(sum));
    uint32_t bits;
    std::memcpy(&bits, &logprob, 4);
    g.ids.push_back(static_cast<int32_t>(best));
    g.logprob_bits.push_back(bits);
    model.step(*seq, static_cast<int32_t>(best), logits);
  }
  return g;
}

}  // namespace wsb::test
