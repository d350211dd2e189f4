// TP layouts of the MoE families: storage names/shapes per rank, and element tracing -- every gathered element of
// every runtime storage of every rank (TP 1, 2, 4) is found, through the transform's accessor, at its runtime
// position holding the bytes of the canonical element an independent oracle names; every other runtime byte
// (padding) is zero although the buffer was dirty before the load; every canonical element is used by some rank.
// Includes ceil-sharded NVFP4 w2 scales (a 16-block straddling two ranks), gpt_oss's uneven block split and gpt_oss's
// K-major BF16 experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/errors.hpp"
#include "models/layout/moe_access.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;
using Index = std::vector<int64_t>;

using test::expect_error;

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// A canonical checkpoint whose bytes are non-zero codes of (tensor, byte index), so padding (zero) and every
/// misplaced byte are visible. NVFP4 scalars hold floats instead: weight_scale_2 equal for the gate/up pair of an
/// expert (as the w13 transforms require), input_scale distinct per tensor.
struct Canonical {
  std::map<std::string, TensorSpec> specs;
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::map<std::string, std::vector<uint8_t>> hits;  // per element: used by some storage

  explicit Canonical(const ModelProfile& p) {
    for (const TensorSpec& s : p.canonical_tensors()) {
      std::vector<uint8_t> b(s.bytes());
      if (ends_with(s.name, "weight_scale_2") || ends_with(s.name, "input_scale")) {
        std::string key = replace_all(replace_all(s.name, "gate_proj", "w13"), "up_proj", "w13");
        if (ends_with(s.name, "input_scale")) key = s.name;
        const float v = 0.0625f * static_cast<float>(1 + name_hash(key) % 61);
        std::memcpy(b.data(), &v, 4);
      } else {
        const uint64_t t = name_hash(s.name);
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(1 + mix(t + i) % 255);
      }
      bytes[s.name] = std::move(b);
      hits[s.name].assign(s.numel(), 0);
      specs[s.name] = s;
    }
  }
  CanonicalLookup lookup() const {
    return [this](const std::string& name) { return std::span<const uint8_t>(bytes.at(name)); };
  }
  float f32(const std::string& name) {
    hits.at(name).at(0) = 1;
    float v;
    std::memcpy(&v, bytes.at(name).data(), 4);
    return v;
  }
};

/// Source of one gathered element: canonical tensor and its multi-index.
struct Src {
  std::string tensor;
  Index idx;
};
using Oracle = std::function<Src(const Index&)>;

struct Split {
  std::string layer;  // "model.layers.<i>." or "" for model-level storages
  std::string rest;
};
Split split(const std::string& storage) {
  if (storage.rfind("model.layers.", 0) != 0) return {"", storage};
  const size_t dot = storage.find('.', 13);
  return {storage.substr(0, dot + 1), storage.substr(dot + 1)};
}

/// Rules shared by the families: vocab-parallel rows, replicated tensors, dense MLP [gate; up] rows and down
/// columns (with FP8 scales when `scaled`), GQA qkv rows.
struct Common {
  const ModelDims& d;
  int tp, rank;
  std::string pre;  // canonical tensor prefix

  std::optional<Oracle> try_common(const std::string& storage) const {
    const Split s = split(storage);
    const std::string canon = pre + storage;
    if (storage == "model.embed_tokens.weight" || storage == "lm_head.weight") {
      const int64_t rows = d.vocab / tp, r = rank;
      return [canon, rows, r](const Index& g) { return Src{canon, {r * rows + g[0], g[1]}}; };
    }
    if (storage == "model.norm.weight") return [canon](const Index& g) { return Src{canon, g}; };
    for (const char* leaf :
         {"input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate.weight",
          "mlp.gate.e_score_correction_bias", "self_attn.q_a_layernorm.weight", "self_attn.kv_a_layernorm.weight",
          "self_attn.o_proj.bias", "self_attn.o_proj.weight_scale", "mlp.router.weight", "mlp.router.bias"})
      if (s.rest == leaf) return [canon](const Index& g) { return Src{canon, g}; };
    for (const char* mlp : {"mlp.", "mlp.shared_experts."}) {
      const std::string m = mlp;
      const int64_t inter = m == "mlp." ? d.intermediate : int64_t{d.shared_experts} * d.moe_intermediate;
      const int64_t per = inter / tp, r = rank;
      const std::string base = pre + s.layer + m;
      for (const char* leaf : {"weight", "weight_scale"}) {
        const std::string l = leaf;
        if (s.rest == m + "gate_up_proj." + l)
          return [=](const Index& g) {
            Index i = g;
            const bool up = g[0] >= per;
            i[0] = r * per + (up ? g[0] - per : g[0]);
            return Src{base + (up ? "up_proj." : "gate_proj.") + l, i};
          };
      }
      if (s.rest == m + "down_proj.weight")
        return [=](const Index& g) { return Src{base + "down_proj.weight", {g[0], r * per + g[1]}}; };
      if (s.rest == m + "down_proj.weight_scale")
        return [=](const Index& g) { return Src{base + "down_proj.weight_scale", g}; };
    }
    return std::nullopt;
  }

  std::optional<Oracle> try_gqa(const std::string& storage) const {
    const Split s = split(storage);
    const int64_t hd = d.head_dim, q_local = d.heads / tp * hd;
    const int64_t kv_local = (tp <= d.kv_heads ? d.kv_heads / tp : 1) * hd;
    const int64_t kv_start = (tp <= d.kv_heads ? rank * (d.kv_heads / tp) : rank / (tp / d.kv_heads)) * hd;
    const int64_t q_start = rank * q_local;
    const std::string attn = pre + s.layer + "self_attn.";
    for (const char* leaf : {"weight", "weight_scale", "bias"}) {
      const std::string l = leaf;
      if (s.rest == "self_attn.qkv_proj." + l)
        return [=](const Index& g) {
          Index i = g;
          if (g[0] < q_local) {
            i[0] = q_start + g[0];
            return Src{attn + "q_proj." + l, i};
          }
          if (g[0] < q_local + kv_local) {
            i[0] = kv_start + g[0] - q_local;
            return Src{attn + "k_proj." + l, i};
          }
          i[0] = kv_start + g[0] - q_local - kv_local;
          return Src{attn + "v_proj." + l, i};
        };
    }
    if (s.rest == "self_attn.o_proj.weight")
      return [=](const Index& g) { return Src{attn + "o_proj.weight", {g[0], q_start + g[1]}}; };
    if (s.rest == "self_attn.sinks") {
      const int64_t h0 = rank * (d.heads / tp);
      return [=](const Index& g) { return Src{attn + "sinks", {h0 + g[0]}}; };
    }
    return std::nullopt;
  }
};

Oracle glm_oracle(const ModelProfile& p, int tp, int rank, const std::string& storage) {
  Common c{p.dims, tp, rank, ""};
  if (auto o = c.try_common(storage)) return *o;
  if (auto o = c.try_gqa(storage)) return *o;
  const Split s = split(storage);
  const int64_t per = p.dims.moe_intermediate / tp, r = rank;
  const std::string ex = s.layer + "mlp.experts.";
  auto expert = [ex](int64_t e, const std::string& leaf) { return ex + std::to_string(e) + "." + leaf; };
  for (const char* leaf : {"weight", "weight_scale"}) {
    const std::string l = leaf;
    if (s.rest == "mlp.experts.w13_" + l)
      return [=](const Index& g) {
        const bool up = g[1] >= per;
        return Src{expert(g[0], up ? "up_proj." + l : "gate_proj." + l), {r * per + (up ? g[1] - per : g[1]), g[2]}};
      };
  }
  if (s.rest == "mlp.experts.w2_weight")
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.weight"), {g[1], r * per + g[2]}}; };
  if (s.rest == "mlp.experts.w2_weight_scale")
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.weight_scale"), {g[1], g[2]}}; };
  ADD_FAILURE() << "no oracle for " << storage;
  return [](const Index&) { return Src{}; };
}

Oracle kimi_oracle(const ModelProfile& p, int tp, int rank, const std::string& storage) {
  const ModelDims& d = p.dims;
  Common c{d, tp, rank, p.tensor_prefix};
  if (auto o = c.try_common(storage)) return *o;
  const Split s = split(storage);
  const std::string attn = p.tensor_prefix + s.layer + "self_attn.";
  const int64_t hr = d.heads / tp, r = rank, ql = d.q_lora_rank;
  const int64_t qk = d.qk_nope_head_dim + d.qk_rope_head_dim, kvb = d.qk_nope_head_dim + d.v_head_dim;
  if (s.rest == "self_attn.fused_qkv_a_proj_with_mqa.weight")
    return [=](const Index& g) {
      if (g[0] < ql) return Src{attn + "q_a_proj.weight", g};
      return Src{attn + "kv_a_proj_with_mqa.weight", {g[0] - ql, g[1]}};
    };
  if (s.rest == "self_attn.q_b_proj.weight")
    return [=](const Index& g) { return Src{attn + "q_b_proj.weight", {r * hr * qk + g[0], g[1]}}; };
  if (s.rest == "self_attn.kv_b_proj.weight")
    return [=](const Index& g) { return Src{attn + "kv_b_proj.weight", {r * hr * kvb + g[0], g[1]}}; };
  if (s.rest == "self_attn.o_proj.weight")
    return [=](const Index& g) { return Src{attn + "o_proj.weight", {g[0], r * hr * d.v_head_dim + g[1]}}; };
  const int64_t per = d.moe_intermediate / tp;
  const std::string ex = p.tensor_prefix + s.layer + "mlp.experts.";
  auto expert = [ex](int64_t e, const std::string& leaf) { return ex + std::to_string(e) + "." + leaf; };
  for (const char* leaf : {"weight", "weight_scale"}) {
    const std::string l = leaf;
    if (s.rest == "mlp.experts.w13_" + l)  // [up; gate] per expert
      return [=](const Index& g) {
        const bool gate = g[1] >= per;
        return Src{expert(g[0], gate ? "gate_proj." + l : "up_proj." + l),
                   {r * per + (gate ? g[1] - per : g[1]), g[2]}};
      };
  }
  if (s.rest == "mlp.experts.w2_weight")  // bytes: two codes each
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.weight"), {g[1], r * per / 2 + g[2]}}; };
  if (s.rest == "mlp.experts.w2_weight_scale")  // ceil: first column of the block holding element r*per
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.weight_scale"), {g[1], r * per / 16 + g[2]}}; };
  if (s.rest == "mlp.experts.w2_weight_scale_2")
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.weight_scale_2"), {}}; };
  if (s.rest == "mlp.experts.w2_input_scale")
    return [=](const Index& g) { return Src{expert(g[0], "down_proj.input_scale"), {}}; };
  ADD_FAILURE() << "no oracle for " << storage;
  return [](const Index&) { return Src{}; };
}

Oracle gpt_oss_oracle(const ModelProfile& p, int tp, int rank, const std::string& storage) {
  const ModelDims& d = p.dims;
  Common c{d, tp, rank, ""};
  if (auto o = c.try_common(storage)) return *o;
  if (auto o = c.try_gqa(storage)) return *o;
  const Split s = split(storage);
  const int64_t blocks_per_rank = (d.intermediate / 32 + tp - 1) / tp;
  const int64_t start = std::min<int64_t>(rank * blocks_per_rank * 32, d.intermediate);
  const std::string ex = s.layer + "mlp.experts.";
  if (s.rest == "mlp.experts.w13_weight")
    return [=](const Index& g) { return Src{ex + "gate_up_proj_blocks", {g[0], 2 * start + g[1], g[2], g[3]}}; };
  if (s.rest == "mlp.experts.w13_weight_scale")
    return [=](const Index& g) { return Src{ex + "gate_up_proj_scales", {g[0], 2 * start + g[1], g[2]}}; };
  if (s.rest == "mlp.experts.w13_bias")
    return [=](const Index& g) { return Src{ex + "gate_up_proj_bias", {g[0], 2 * start + g[1]}}; };
  if (s.rest == "mlp.experts.w2_weight")
    return [=](const Index& g) { return Src{ex + "down_proj_blocks", {g[0], g[1], start / 32 + g[2], g[3]}}; };
  if (s.rest == "mlp.experts.w2_bias") return [=](const Index& g) { return Src{ex + "down_proj_bias", g}; };
  if (s.rest == "mlp.experts.w2_weight_scale")
    return [=](const Index& g) { return Src{ex + "down_proj_scales", {g[0], g[1], start / 32 + g[2]}}; };
  ADD_FAILURE() << "no oracle for " << storage;
  return [](const Index&) { return Src{}; };
}

/// gpt_oss with BF16 experts: the rank's I/tp intermediate columns of the canonical [E, in, out] tensors. Output j
/// of the local intermediate is global start + j; gate/up keep their parity (column 2j gate, 2j + 1 up).
Oracle gpt_oss_bf16_oracle(const ModelProfile& p, int tp, int rank, const std::string& storage) {
  const ModelDims& d = p.dims;
  Common c{d, tp, rank, ""};
  if (auto o = c.try_common(storage)) return *o;
  if (auto o = c.try_gqa(storage)) return *o;
  const Split s = split(storage);
  const int64_t start = rank * (d.intermediate / tp);
  const std::string ex = s.layer + "mlp.experts.";
  if (s.rest == "mlp.experts.w13_weight")  // [E, H, 2 I_r]: local output g[2] = 2j + parity
    return [=](const Index& g) {
      return Src{ex + "gate_up_proj", {g[0], g[1], 2 * (start + g[2] / 2) + g[2] % 2}};
    };
  if (s.rest == "mlp.experts.w13_bias")
    return [=](const Index& g) { return Src{ex + "gate_up_proj_bias", {g[0], 2 * (start + g[1] / 2) + g[1] % 2}}; };
  if (s.rest == "mlp.experts.w2_weight")  // [E, I_r, H]: input rows of the local intermediate
    return [=](const Index& g) { return Src{ex + "down_proj", {g[0], start + g[1], g[2]}}; };
  if (s.rest == "mlp.experts.w2_bias") return [=](const Index& g) { return Src{ex + "down_proj_bias", g}; };
  ADD_FAILURE() << "no oracle for " << storage;
  return [](const Index&) { return Src{}; };
}

/// Runtime byte offset of gathered element `g` of `spec` (the transform's accessor); nullopt for the per-expert
/// scalar transforms, which combine elements and are checked by value.
std::optional<uint64_t> runtime_offset(const RuntimeStorageSpec& spec, const Index& g) {
  const std::string& t = spec.transform;
  auto row_major = [&](const Shape& shape) {
    uint64_t o = 0;
    for (size_t i = 0; i < shape.size(); ++i) o = o * static_cast<uint64_t>(shape[i]) + static_cast<uint64_t>(g[i]);
    return o * dtype_size(spec.dtype);
  };
  if (t == "none" || t == kMxfp4Pad) return row_major(spec.shape);
  const size_t r = g.size();
  const int64_t e = r == 3 ? g[0] : 0;
  if (t == kFp8ChannelWeight) return weight_element(spec, e, g[r - 2], g[r - 1]).byte;
  if (t == kFp8ChannelScale) return scale_element(spec, e, g[r - 2], 0);
  if (t == kNvfp4ScaleSwizzle) return nvfp4_scale_offset(spec.shape, g[0], g[1], g[2]);
  if (t == kMxfp4ScaleSwizzle) return mxfp4_scale_offset(spec.shape, g[0], g[1], g[2]);
  return std::nullopt;
}

void for_each_index(const Shape& shape, const std::function<void(const Index&)>& fn) {
  if (shape_numel(shape) == 0) return;
  Index idx(shape.size(), 0);
  while (true) {
    fn(idx);
    size_t d = shape.size();
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

uint64_t flat(const Shape& shape, const Index& idx) {
  uint64_t o = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    EXPECT_LT(idx[i], shape[i]);
    o = o * static_cast<uint64_t>(shape[i]) + static_cast<uint64_t>(idx[i]);
  }
  return o;
}

float f32_at(const std::vector<uint8_t>& b, int64_t i) {
  float v;
  std::memcpy(&v, b.data() + i * 4, 4);
  return v;
}

/// NVFP4 per-expert scalars by value (nvfp4.hpp rules), from the canonical floats.
void check_nvfp4_scalars(const ModelProfile& p, const RuntimeStorageSpec& spec, const std::vector<uint8_t>& out,
                         Canonical& canon) {
  const Split s = split(spec.name);
  const std::string ex = p.tensor_prefix + s.layer + "mlp.experts.";
  for (int e = 0; e < p.dims.experts; ++e) {
    auto f = [&](const std::string& leaf) { return canon.f32(ex + std::to_string(e) + "." + leaf); };
    float want = -1;
    if (s.rest == "mlp.experts.w13_weight_scale_2" || s.rest == "mlp.experts.w13_alpha") {
      EXPECT_EQ(f("gate_proj.weight_scale_2"), f("up_proj.weight_scale_2"));  // the fixture keeps the pair equal
      want = f("gate_proj.weight_scale_2");
    }
    if (s.rest == "mlp.experts.w13_input_scale" || s.rest == "mlp.experts.w13_alpha") {
      const float input = std::max(f("gate_proj.input_scale"), f("up_proj.input_scale"));
      want = s.rest == "mlp.experts.w13_alpha" ? input * want : input;
    }
    if (s.rest == "mlp.experts.w2_alpha") want = f("down_proj.input_scale") * f("down_proj.weight_scale_2");
    EXPECT_EQ(f32_at(out, e), want) << spec.name << " expert " << e;
  }
}

using OracleFactory = Oracle (*)(const ModelProfile&, int, int, const std::string&);

/// Loads every storage of every rank into a dirty buffer and traces every gathered element.
void trace_profile(const ModelProfile& p, OracleFactory oracle, std::initializer_list<int> tps) {
  for (int tp : tps) {
    Canonical canon(p);
    for (const RankLayout& layout : build_rank_layouts(p, tp)) {
      for (const RuntimeStorageSpec& spec : layout.storages) {
        std::vector<uint8_t> out(spec.bytes(), 0xEE);  // dirty: padding must be rewritten
        load_storage(spec, canon.lookup(), out);
        std::vector<uint8_t> written(out.size(), 0);
        const size_t esize = dtype_size(spec.dtype);
        if (spec.transform.rfind("nvfp4_w", 0) == 0) {  // per-expert scalars: combined, checked by value
          check_nvfp4_scalars(p, spec, out, canon);
          continue;
        }
        Oracle o = oracle(p, tp, layout.rank, spec.name);
        bool failed = false;
        for_each_index(spec.gathered_shape, [&](const Index& g) {
          if (failed) return;
          const Src src = o(g);
          if (!canon.specs.count(src.tensor)) {
            ADD_FAILURE() << spec.name << ": oracle names unknown tensor '" << src.tensor << "'";
            failed = true;
            return;
          }
          const TensorSpec& cs = canon.specs.at(src.tensor);
          const uint64_t elem = flat(cs.shape, src.idx);
          const uint64_t at = *runtime_offset(spec, g);
          canon.hits.at(src.tensor).at(elem) = 1;
          if (std::memcmp(out.data() + at, canon.bytes.at(src.tensor).data() + elem * esize, esize) != 0) {
            ADD_FAILURE() << p.id << " tp=" << tp << " rank=" << layout.rank << " " << spec.name << " gathered "
                          << shape_string(g) << " -> " << src.tensor << shape_string(src.idx);
            failed = true;
          }
          std::memset(written.data() + at, 1, esize);
        });
        for (size_t i = 0; i < out.size() && !failed; ++i)
          if (!written[i] && out[i] != 0) {
            ADD_FAILURE() << spec.name << " padding byte " << i << " is " << int(out[i]);
            failed = true;
          }
      }
    }
    for (const auto& [name, h] : canon.hits)
      EXPECT_EQ(std::count(h.begin(), h.end(), 0), 0)
          << p.id << " tp=" << tp << ": '" << name << "' has elements no rank holds";
  }
}

TEST(MoeLayout, GlmTinyEveryElementTraces) {
  trace_profile(find_profile("glm-tiny-fp8", kProfiles), glm_oracle, {1, 2, 4});
}

TEST(MoeLayout, KimiTinyEveryElementTraces) {
  trace_profile(find_profile("kimi-tiny-nvfp4", kProfiles), kimi_oracle, {1, 2, 4});
}

TEST(MoeLayout, GptOssTinyEveryElementTraces) {
  trace_profile(find_profile("gpt-oss-tiny-mxfp4", kProfiles), gpt_oss_oracle, {1, 2, 4});
}

TEST(MoeLayout, GptOssTinyBf16EveryElementTraces) {
  trace_profile(find_profile("gpt-oss-tiny-bf16", kProfiles), gpt_oss_bf16_oracle, {1, 2, 4});
}

/// Kimi-tiny with moe_intermediate 48: at TP 2 each rank holds 24 columns of down_proj, so 16-blocks straddle.
ModelProfile straddling_kimi() {
  std::ifstream in(kProfiles / "kimi-tiny-nvfp4.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["id"] = "kimi-straddle";
  j["dims"]["moe_intermediate"] = 48;
  j["dims"]["layers"] = 2;
  return parse_profile(j, "kimi-straddle.json");
}

TEST(MoeLayout, CeilShardedNvfp4ScalesTrace) {
  ModelProfile p = straddling_kimi();
  EXPECT_EQ(nvfp4_w2_scale_columns(p.dims, 2, 0).start, 0);
  EXPECT_EQ(nvfp4_w2_scale_columns(p.dims, 2, 0).length, 2);  // elements 0..23: blocks 0, 1 (half)
  EXPECT_EQ(nvfp4_w2_scale_columns(p.dims, 2, 1).start, 1);   // elements 24..47: blocks 1 (half), 2
  EXPECT_EQ(nvfp4_w2_scale_columns(p.dims, 2, 1).length, 2);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  const RuntimeStorageSpec& w2s = l[1].storages[l[1].index_of("model.layers.1.mlp.experts.w2_weight_scale")];
  EXPECT_EQ(w2s.gathered_shape, (Shape{8, 128, 2}));
  EXPECT_EQ(w2s.shape, (Shape{8, 128, 4}));
  ASSERT_EQ(w2s.fragments.size(), 8u);
  EXPECT_EQ(w2s.fragments[3].canonical, "language_model.model.layers.1.mlp.experts.3.down_proj.weight_scale");
  EXPECT_EQ(w2s.fragments[3].dim, 1);
  EXPECT_EQ(w2s.fragments[3].start, 1);
  EXPECT_EQ(w2s.fragments[3].length, 2);
  trace_profile(p, kimi_oracle, {2});

  // The forward's view: local element k = 0 of rank 1 is global 24, in block 1 = local scale column 0 (phase 8);
  // local k = 8 is global 32, block 2 = local column 1.
  Canonical canon(p);
  std::vector<uint8_t> out(w2s.bytes());
  load_storage(w2s, canon.lookup(), out);
  const std::vector<uint8_t>& src =
      canon.bytes.at("language_model.model.layers.1.mlp.experts.5.down_proj.weight_scale");
  const int64_t phase = moe_intermediate_slice(p.dims, 2, 1).start % 16;
  EXPECT_EQ(phase, 8);
  EXPECT_EQ(out[scale_element(w2s, 5, 100, 0, phase)], src[100 * 3 + 1]);
  EXPECT_EQ(out[scale_element(w2s, 5, 100, 7, phase)], src[100 * 3 + 1]);
  EXPECT_EQ(out[scale_element(w2s, 5, 100, 8, phase)], src[100 * 3 + 2]);
  EXPECT_EQ(out[scale_element(w2s, 5, 100, 23, phase)], src[100 * 3 + 2]);
}

TEST(MoeLayout, AccessorsFindTheCanonicalElements) {
  auto loaded = [](const Canonical& canon, const RankLayout& l, const std::string& name) {
    const RuntimeStorageSpec& s = l.storages.at(l.index_of(name));
    std::vector<uint8_t> out(s.bytes(), 0xEE);
    load_storage(s, canon.lookup(), out);
    return std::pair{s, out};
  };
  {  // glm: FP8 w2 of rank 3 of 4 (K = 12 local columns starting at 36)
    ModelProfile p = find_profile("glm-tiny-fp8", kProfiles);
    Canonical canon(p);
    std::vector<RankLayout> l = build_rank_layouts(p, 4);
    auto [w2, out] = loaded(canon, l[3], "model.layers.1.mlp.experts.w2_weight");
    const ElementPos pos = weight_element(w2, 1, 100, 5);
    EXPECT_EQ(pos.nibble, -1);
    EXPECT_EQ(pos.byte, (1u * 16u + 5u) * 128u + 100u);
    EXPECT_EQ(out[pos.byte], canon.bytes.at("model.layers.1.mlp.experts.1.down_proj.weight")[100 * 48 + 36 + 5]);
    auto [scale, sout] = loaded(canon, l[3], "model.layers.1.mlp.experts.w2_weight_scale");
    EXPECT_EQ(std::memcmp(&sout[scale_element(scale, 1, 100, 5)],
                          &canon.bytes.at("model.layers.1.mlp.experts.1.down_proj.weight_scale")[100 * 4], 4),
              0);
    auto [bias, bout] = loaded(canon, l[3], "model.layers.0.self_attn.qkv_proj.bias");
    expect_error([&, &b = bias] { weight_element(b, 0, 0, 0); }, ErrorKind::Format,
                 {"storage 'model.layers.0.self_attn.qkv_proj.bias'", "no weight element accessor"});
  }
  {  // kimi: packed NVFP4 w13 of rank 1 of 2: rows [up 32..63; gate 32..63], K = 128 codes in 64 bytes
    ModelProfile p = find_profile("kimi-tiny-nvfp4", kProfiles);
    Canonical canon(p);
    std::vector<RankLayout> l = build_rank_layouts(p, 2);
    auto [w13, out] = loaded(canon, l[1], "model.layers.2.mlp.experts.w13_weight");
    const ElementPos pos = weight_element(w13, 3, 5, 9);  // up row 32 + 5, k 9: byte 4, high nibble
    EXPECT_EQ(pos, (ElementPos{(3u * 64u + 5u) * 64u + 4u, 1}));
    EXPECT_EQ(out[pos.byte], canon.bytes.at("language_model.model.layers.2.mlp.experts.3.up_proj.weight")[37 * 64 + 4]);
    const ElementPos gate = weight_element(w13, 3, 32 + 5, 8);  // gate row 37, k 8: low nibble
    EXPECT_EQ(gate.nibble, 0);
    EXPECT_EQ(out[gate.byte],
              canon.bytes.at("language_model.model.layers.2.mlp.experts.3.gate_proj.weight")[37 * 64 + 4]);
    auto [scale, sout] = loaded(canon, l[1], "model.layers.2.mlp.experts.w13_weight_scale");
    EXPECT_EQ(sout[scale_element(scale, 3, 32 + 5, 40)],
              canon.bytes.at("language_model.model.layers.2.mlp.experts.3.gate_proj.weight_scale")[37 * 8 + 2]);
  }
  {  // gpt_oss: interleaved MXFP4 w13 of rank 1 of 2 (local intermediate starts at 128)
    ModelProfile p = find_profile("gpt-oss-tiny-mxfp4", kProfiles);
    Canonical canon(p);
    std::vector<RankLayout> l = build_rank_layouts(p, 2);
    auto [w13, out] = loaded(canon, l[1], "model.layers.0.mlp.experts.w13_weight");
    const ElementPos up = weight_element(w13, 2, 2 * 7 + 1, 70);  // up of local j = 7, k 70: block 2, byte 3
    EXPECT_EQ(up, (ElementPos{((2u * 256u + 15u) * 3u + 2u) * 16u + 3u, 0}));
    const auto& blocks = canon.bytes.at("model.layers.0.mlp.experts.gate_up_proj_blocks");
    EXPECT_EQ(out[up.byte], blocks[((2 * 448 + 2 * 128 + 15) * 3 + 2) * 16 + 3]);
    auto [scale, sout] = loaded(canon, l[1], "model.layers.0.mlp.experts.w13_weight_scale");
    EXPECT_EQ(sout[scale_element(scale, 2, 15, 70)],
              canon.bytes.at("model.layers.0.mlp.experts.gate_up_proj_scales")[(2 * 448 + 256 + 15) * 3 + 2]);
    EXPECT_EQ(out[weight_element(w13, 2, 2 * 100, 0).byte], 0);  // rank 1 holds 96 of 128: row 200 is padding
    auto [qkv, qout] = loaded(canon, l[1], "model.layers.1.self_attn.qkv_proj.weight");  // BF16 [q 64 | k 32 | v 32]
    const ElementPos k = weight_element(qkv, 0, 64 + 3, 50);
    EXPECT_EQ(k, (ElementPos{((64u + 3u) * 96u + 50u) * 2u, -1}));
    EXPECT_EQ(std::memcmp(&qout[k.byte],
                          &canon.bytes.at("model.layers.1.self_attn.k_proj.weight")[((32 + 3) * 96 + 50) * 2], 2),
              0);
  }
}

TEST(MoeLayout, GlmTinyStorageShapes) {
  ModelProfile p = find_profile("glm-tiny-fp8", kProfiles);
  std::vector<RankLayout> l = build_rank_layouts(p, 4);
  const RankLayout& r3 = l[3];
  struct Want {
    std::string name;
    DType dtype;
    Shape gathered, runtime;
    std::string transform;
  };
  const std::vector<Want> want = {
      {"model.embed_tokens.weight", DType::BF16, {128, 128}, {128, 128}, "none"},
      {"model.layers.0.input_layernorm.weight", DType::BF16, {128}, {128}, "none"},
      // 2 q heads + 1 k + 1 v head of 16 -> 64 rows; K = 128.
      {"model.layers.0.self_attn.qkv_proj.weight", DType::F8_E4M3, {64, 128}, {128, 64}, "fp8_channel_weight"},
      {"model.layers.0.self_attn.qkv_proj.weight_scale", DType::F32, {64, 1}, {64}, "fp8_channel_scale"},
      {"model.layers.0.self_attn.qkv_proj.bias", DType::BF16, {64}, {64}, "none"},
      {"model.layers.0.self_attn.o_proj.weight", DType::F8_E4M3, {128, 32}, {32, 128}, "fp8_channel_weight"},
      {"model.layers.0.self_attn.o_proj.weight_scale", DType::F32, {128, 1}, {128}, "fp8_channel_scale"},
      {"model.layers.0.post_attention_layernorm.weight", DType::BF16, {128}, {128}, "none"},
      // dense intermediate 96 / 4 = 24: gate_up N = 48 -> 48; down K = 24 -> 32.
      {"model.layers.0.mlp.gate_up_proj.weight", DType::F8_E4M3, {48, 128}, {128, 48}, "fp8_channel_weight"},
      {"model.layers.0.mlp.gate_up_proj.weight_scale", DType::F32, {48, 1}, {48}, "fp8_channel_scale"},
      {"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {128, 24}, {32, 128}, "fp8_channel_weight"},
      {"model.layers.0.mlp.down_proj.weight_scale", DType::F32, {128, 1}, {128}, "fp8_channel_scale"},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    const RuntimeStorageSpec& s = r3.storages.at(i);
    EXPECT_EQ(s.name, want[i].name);
    EXPECT_EQ(s.dtype, want[i].dtype) << s.name;
    EXPECT_EQ(s.gathered_shape, want[i].gathered) << s.name;
    EXPECT_EQ(s.shape, want[i].runtime) << s.name;
    EXPECT_EQ(s.transform, want[i].transform) << s.name;
  }
  auto at = [&](const std::string& name) { return r3.storages.at(r3.index_of(name)); };
  // moe_intermediate 48 / 4 = 12 per rank: w13 N = 24 -> 32, w2 K = 12 -> 16.
  EXPECT_EQ(at("model.layers.1.mlp.experts.w13_weight").shape, (Shape{8, 128, 32}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w13_weight").gathered_shape, (Shape{8, 24, 128}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w13_weight_scale").shape, (Shape{8, 32}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w2_weight").shape, (Shape{8, 16, 128}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w2_weight_scale").shape, (Shape{8, 128}));
  EXPECT_EQ(at("model.layers.1.mlp.gate.e_score_correction_bias").dtype, DType::F32);
  EXPECT_EQ(at("model.layers.2.mlp.shared_experts.gate_up_proj.weight").shape, (Shape{128, 32}));
  EXPECT_EQ(r3.storages.back().name, "lm_head.weight");
  EXPECT_EQ(r3.storages.size(), 1u + 11u + 2u * 17u + 2u);
  // Rank 3's w13 fragments: expert 0 gate rows [36, 48), expert 0 up rows [36, 48), expert 1 gate ...
  const RuntimeStorageSpec& w13 = at("model.layers.2.mlp.experts.w13_weight");
  ASSERT_EQ(w13.fragments.size(), 16u);
  EXPECT_EQ(w13.fragments[1].canonical, "model.layers.2.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(w13.fragments[1].start, 36);
  EXPECT_EQ(w13.fragments[2].canonical, "model.layers.2.mlp.experts.1.gate_proj.weight");
}

TEST(MoeLayout, KimiTinyStorageShapes) {
  ModelProfile p = find_profile("kimi-tiny-nvfp4", kProfiles);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  const RankLayout& r1 = l[1];
  auto at = [&](const std::string& name) { return r1.storages.at(r1.index_of(name)); };
  EXPECT_EQ(at("model.layers.0.self_attn.fused_qkv_a_proj_with_mqa.weight").shape, (Shape{64 + 32 + 8, 128}));
  EXPECT_EQ(at("model.layers.0.self_attn.q_b_proj.weight").shape, (Shape{4 * 24, 64}));
  EXPECT_EQ(at("model.layers.0.self_attn.kv_b_proj.weight").shape, (Shape{4 * 32, 32}));
  EXPECT_EQ(at("model.layers.0.self_attn.o_proj.weight").shape, (Shape{128, 4 * 16}));
  EXPECT_EQ(at("model.layers.0.mlp.gate_up_proj.weight").shape, (Shape{192, 128}));
  const RuntimeStorageSpec w13 = at("model.layers.1.mlp.experts.w13_weight");
  EXPECT_EQ(w13.shape, (Shape{8, 64, 64}));
  EXPECT_EQ(w13.transform, "none");
  EXPECT_EQ(w13.fragments[0].canonical, "language_model.model.layers.1.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(w13.fragments[0].start, 32);
  EXPECT_EQ(w13.fragments[1].canonical, "language_model.model.layers.1.mlp.experts.0.gate_proj.weight");
  const RuntimeStorageSpec s13 = at("model.layers.1.mlp.experts.w13_weight_scale");
  EXPECT_EQ(s13.gathered_shape, (Shape{8, 64, 8}));
  EXPECT_EQ(s13.shape, (Shape{8, 128, 8}));
  EXPECT_EQ(s13.transform, "nvfp4_scale_swizzle");
  EXPECT_EQ(at("model.layers.1.mlp.experts.w2_weight").shape, (Shape{8, 128, 16}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w2_weight_scale").shape, (Shape{8, 128, 4}));
  for (const char* n :
       {"w13_weight_scale_2", "w13_input_scale", "w13_alpha", "w2_weight_scale_2", "w2_input_scale", "w2_alpha"}) {
    const RuntimeStorageSpec s = at(std::string("model.layers.2.mlp.experts.") + n);
    EXPECT_EQ(s.shape, (Shape{8})) << n;
    EXPECT_EQ(s.dtype, DType::F32) << n;
  }
  EXPECT_EQ(at("model.layers.1.mlp.experts.w13_alpha").gathered_shape, (Shape{8, 4}));
  EXPECT_EQ(at("model.layers.1.mlp.experts.w13_alpha").fragments[3].canonical,
            "language_model.model.layers.1.mlp.experts.0.up_proj.weight_scale_2");
  EXPECT_EQ(at("model.layers.1.mlp.shared_experts.down_proj.weight").shape, (Shape{128, 32}));
}

TEST(MoeLayout, GptOssTinyUnevenBlocksArePadded) {
  ModelProfile p = find_profile("gpt-oss-tiny-mxfp4", kProfiles);  // intermediate 224 = 7 blocks
  // TP 4: ceil(7/4) = 2 blocks per rank -> ranks hold 64, 64, 64, 32 elements, all padded to 64.
  EXPECT_EQ(gpt_oss_intermediate_slice(p.dims, 4, 3).start, 192);
  EXPECT_EQ(gpt_oss_intermediate_slice(p.dims, 4, 3).length, 32);
  EXPECT_EQ(gpt_oss_intermediate_slice(p.dims, 4, 3).padded, 64);
  EXPECT_EQ(gpt_oss_intermediate_slice(p.dims, 2, 1).length, 96);
  EXPECT_EQ(gpt_oss_intermediate_slice(p.dims, 2, 1).padded, 128);
  std::vector<RankLayout> l = build_rank_layouts(p, 4);
  auto at = [&](int r, const std::string& name) { return l[r].storages.at(l[r].index_of(name)); };
  const std::string ex = "model.layers.1.mlp.experts.";
  EXPECT_EQ(at(3, ex + "w13_weight").gathered_shape, (Shape{8, 64, 3, 16}));
  EXPECT_EQ(at(3, ex + "w13_weight").shape, (Shape{8, 128, 3, 16}));
  EXPECT_EQ(at(0, ex + "w13_weight").gathered_shape, (Shape{8, 128, 3, 16}));
  EXPECT_EQ(at(3, ex + "w13_weight_scale").shape, (Shape{8, 8, 128}));  // M 128 -> 256, K 3 -> 4
  EXPECT_EQ(at(3, ex + "w13_bias").shape, (Shape{8, 128}));
  EXPECT_EQ(at(3, ex + "w2_weight").gathered_shape, (Shape{8, 96, 1, 16}));
  EXPECT_EQ(at(3, ex + "w2_weight").shape, (Shape{8, 96, 2, 16}));
  EXPECT_EQ(at(3, ex + "w2_weight_scale").shape, (Shape{8, 8, 64}));  // M 96 -> 256, K 2
  EXPECT_EQ(at(3, ex + "w2_bias").shape, (Shape{8, 96}));
  EXPECT_EQ(at(2, "model.layers.0.self_attn.sinks").shape, (Shape{2}));
  EXPECT_EQ(at(2, "model.layers.0.self_attn.sinks").fragments[0].start, 4);
  EXPECT_EQ(at(1, "model.layers.0.self_attn.qkv_proj.bias").shape, (Shape{64}));
  // Every rank has the same storage list and runtime shapes, padding included.
  for (size_t i = 0; i < l[0].storages.size(); ++i) EXPECT_EQ(l[0].storages[i].shape, l[3].storages[i].shape);
}

TEST(MoeLayout, GptOssTinyBf16StorageShapes) {
  ModelProfile p = find_profile("gpt-oss-tiny-bf16", kProfiles);  // intermediate 224: 56 per rank at TP 4
  EXPECT_EQ(gpt_oss_expert_slice(p, 4, 3).start, 168);
  EXPECT_EQ(gpt_oss_expert_slice(p, 4, 3).length, 56);
  EXPECT_EQ(gpt_oss_expert_slice(p, 4, 3).padded, 56);
  EXPECT_EQ(gpt_oss_expert_slice(find_profile("gpt-oss-tiny-mxfp4", kProfiles), 4, 3).padded, 64);
  std::vector<RankLayout> l = build_rank_layouts(p, 4);
  const RankLayout& r3 = l[3];
  auto at = [&](const std::string& name) { return r3.storages.at(r3.index_of(name)); };
  const std::string ex = "model.layers.1.mlp.experts.";
  struct Want {
    std::string leaf;
    Shape shape;
    std::string canonical;
    int dim;
    int64_t start, length;
  };
  for (const Want& w : std::vector<Want>{{"w13_weight", {8, 96, 112}, "gate_up_proj", 2, 336, 112},
                                         {"w13_bias", {8, 112}, "gate_up_proj_bias", 1, 336, 112},
                                         {"w2_weight", {8, 56, 96}, "down_proj", 1, 168, 56},
                                         {"w2_bias", {8, 96}, "down_proj_bias", 0, 0, 8}}) {
    const RuntimeStorageSpec s = at(ex + w.leaf);
    EXPECT_EQ(s.dtype, DType::BF16) << w.leaf;
    EXPECT_EQ(s.transform, "none") << w.leaf;
    EXPECT_EQ(s.shape, w.shape) << w.leaf;
    EXPECT_EQ(s.gathered_shape, w.shape) << w.leaf;
    ASSERT_EQ(s.fragments.size(), 1u) << w.leaf;
    EXPECT_EQ(s.fragments[0].canonical, ex + w.canonical) << w.leaf;
    EXPECT_EQ(s.fragments[0].dim, w.dim) << w.leaf;
    EXPECT_EQ(s.fragments[0].start, w.start) << w.leaf;
    EXPECT_EQ(s.fragments[0].length, w.length) << w.leaf;
    // A stacked canonical tensor sliced below the expert dim loads expert by expert (storage_slices).
    EXPECT_EQ(storage_slices(s), 8) << w.leaf;
  }
  for (const char* gone : {"w13_weight_scale", "w2_weight_scale"})
    expect_error([&] { r3.index_of(ex + gone); }, ErrorKind::Missing, {gone});
  // MXFP4's storage list less the two scales; the same list on every rank.
  const RankLayout mx3 = build_rank_layouts(find_profile("gpt-oss-tiny-mxfp4", kProfiles), 4)[3];
  EXPECT_EQ(r3.storages.size(), mx3.storages.size() - 4);
  for (size_t i = 0; i < l[0].storages.size(); ++i) EXPECT_EQ(l[0].storages[i].shape, r3.storages[i].shape);

  // Rank 1 of 2 (local intermediate starts at 112): up of local j = 7 at input k = 5 is canonical column
  // 2 * (112 + 7) + 1 of gate_up_proj, stored at ((e * 96 + k) * 224 + 2j + 1) of the K-major w13.
  Canonical canon(p);
  const RuntimeStorageSpec w13 = build_rank_layouts(p, 2)[1].storages.at(build_rank_layouts(p, 2)[1].index_of(
      "model.layers.0.mlp.experts.w13_weight"));
  std::vector<uint8_t> out(w13.bytes(), 0xEE);
  load_storage(w13, canon.lookup(), out);
  const auto& gu = canon.bytes.at("model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(std::memcmp(&out[((2 * 96 + 5) * 224 + 2 * 7 + 1) * 2], &gu[((2 * 96 + 5) * 448 + 2 * 119 + 1) * 2], 2), 0);
}

TEST(MoeLayout, RealProfilesRankBytes) {
  struct Want {
    std::string id;
    std::map<int, uint64_t> per_rank;  // tp -> bytes of every rank
  };
  // Kimi's 384 experts x 60 layers make its layouts the slowest to build: TP 1 and the TP 4 of the anchors only.
  const std::vector<Want> want = {
      {"glm-4.5-air-fp8",
       {{1, 108'282'407'936ull}, {2, 54'213'128'960ull}, {4, 27'178'489'472ull}, {8, 13'661'202'496ull}}},
      {"kimi-k2.6-nvfp4", {{1, 594'205'904'896ull}, {4, 150'186'397'696ull}}},
      {"gpt-oss-120b-mxfp4",
       {{1, 65'381'526'144ull}, {2, 32'784'863'616ull}, {4, 16'752'248'064ull}, {8, 8'721'784'512ull}}},
      {"gpt-oss-120b-bf16",
       {{1, 233'658'313'344ull}, {2, 116'856'017'280ull}, {4, 58'454'869'248ull}, {8, 29'254'295'232ull}}},
  };
  for (const Want& w : want) {
    ModelProfile p = find_profile(w.id, kProfiles);
    for (const auto& [tp, bytes] : w.per_rank) {
      std::vector<RankLayout> l = build_rank_layouts(p, tp);
      for (const RankLayout& r : l) EXPECT_EQ(r.bytes(), bytes) << w.id << " tp=" << tp << " rank " << r.rank;
    }
  }
  // GLM TP 1 has no padding (every FP8 dim is a multiple of 16) and replicates nothing: rank bytes == canonical.
  // gpt-oss TP 1 adds only the scale swizzle padding: per layer 128 experts x ((5888-5760) x 90 + (3072-2880) x 90).
  EXPECT_EQ(65'381'526'144ull - 65'248'815'744ull, 36ull * 128 * (128 * 90 + 192 * 90));
  // gpt-oss BF16 TP 1 is the canonical checkpoint byte for byte: no transform, no padding, nothing replicated.
  EXPECT_EQ(find_profile("gpt-oss-120b-bf16", kProfiles).canonical_bytes(), 233'658'313'344ull);
}

TEST(MoeLayout, TpErrorsNameTheDimension) {
  expect_error([] { build_rank_layouts(find_profile("glm-tiny-fp8", kProfiles), 3); }, ErrorKind::Mismatch,
               {"profile 'glm-tiny-fp8'", "tp=3 does not divide heads (8)"});
  expect_error([] { build_rank_layouts(find_profile("kimi-tiny-nvfp4", kProfiles), 16); }, ErrorKind::Mismatch,
               {"tp=16 does not divide heads (8)"});
  expect_error([] { build_rank_layouts(find_profile("gpt-oss-tiny-mxfp4", kProfiles), 0); }, ErrorKind::Mismatch,
               {"tp must be >= 1, got 0"});
  // kimi-straddle at TP 4: 48 / 4 = 12 columns -> even, allowed; TP 8 would need 6 -> still even; TP 16 odd: 3.
  ModelProfile p = straddling_kimi();
  nlohmann::json j = p.raw;
  j["dims"]["heads"] = 16;
  j["dims"]["moe_intermediate"] = 48;
  j["dims"]["intermediate"] = 192;
  j["dims"]["vocab"] = 1024;
  expect_error([&] { build_rank_layouts(parse_profile(j, "x.json"), 16); }, ErrorKind::Mismatch,
               {"tp=16 leaves moe_intermediate / tp = 3 odd"});
  j = find_profile("glm-tiny-fp8", kProfiles).raw;
  j["dims"]["moe_intermediate"] = 50;
  expect_error([&] { build_rank_layouts(parse_profile(j, "x.json"), 4); }, ErrorKind::Mismatch,
               {"tp=4 does not divide moe_intermediate (50)"});
}

}  // namespace
}  // namespace wsb
