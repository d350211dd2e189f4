// TP layout: runtime storage names/shapes per rank, exact bytes gathered by load_storage (every element traced
// back to its canonical (tensor, row, col)), kv-head replication, tied lm_head, byte totals and errors.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using test::expect_error;

/// Test profile: q width heads*head_dim (32) differs from hidden (16) so rows and columns cannot be confused;
/// tp=8 > kv_heads=4 exercises kv-head replication.
ModelProfile test_profile(bool tied = false, int heads = 8, int kv_heads = 4, int intermediate = 32, int vocab = 256) {
  nlohmann::json j = {{"id", "layout-test"},
                      {"family", "llama"},
                      {"description", "test"},
                      {"source", "test"},
                      {"quantization", "none"},
                      {"dtype", "BF16"},
                      {"dims",
                       {{"layers", 2},
                        {"hidden", 16},
                        {"intermediate", intermediate},
                        {"heads", heads},
                        {"kv_heads", kv_heads},
                        {"head_dim", 4},
                        {"vocab", vocab},
                        {"rope_theta", 10000.0},
                        {"rms_eps", 1e-5},
                        {"tie_embeddings", tied}}}};
  return parse_profile(j, "layout-test.json");
}

/// 16-bit code of canonical element (tensor index, row, col): a splitmix64 hash, so a wrong source element
/// matches by accident with probability 2^-16 per checked element.
uint16_t code(size_t tensor, int64_t row, int64_t col) {
  uint64_t z = (tensor + 1) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(row) * 0xBF58476D1CE4E5B9ull ^
               static_cast<uint64_t>(col + 7) * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint16_t>(z ^ (z >> 31));
}

/// Canonical checkpoint of a profile with every element set to code(tensor index, row, col); 1-D tensors use
/// row 0, col = index.
struct Canonical {
  std::map<std::string, size_t> ids;
  std::map<std::string, std::vector<uint8_t>> bytes;

  explicit Canonical(const ModelProfile& p) {
    std::vector<TensorSpec> tensors = p.canonical_tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const TensorSpec& s = tensors[t];
      ids[s.name] = t;
      const int64_t rows = s.shape.size() == 2 ? s.shape[0] : 1;
      const int64_t cols = s.shape.back();
      std::vector<uint8_t> b(s.bytes());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          uint16_t v = code(t, r, c);
          std::memcpy(&b[static_cast<size_t>((r * cols + c) * 2)], &v, 2);
        }
      bytes[s.name] = std::move(b);
    }
  }
  uint16_t at(const std::string& tensor, int64_t row, int64_t col) const { return code(ids.at(tensor), row, col); }
  CanonicalLookup lookup() const {
    return [this](const std::string& name) { return std::span<const uint8_t>(bytes.at(name)); };
  }
};

/// A loaded runtime storage with element access.
struct Loaded {
  RuntimeStorageSpec spec;
  std::vector<uint8_t> bytes;
  int64_t cols() const { return spec.shape.back(); }
  int64_t rows() const { return spec.shape.size() == 2 ? spec.shape[0] : 1; }
  uint16_t at(int64_t row, int64_t col) const {
    uint16_t v;
    std::memcpy(&v, &bytes.at(static_cast<size_t>((row * cols() + col) * 2)), 2);
    return v;
  }
};

Loaded load(const RankLayout& layout, const std::string& name, const Canonical& canon) {
  Loaded l{layout.storages.at(layout.index_of(name)), {}};
  l.bytes.resize(l.spec.bytes());
  load_storage(l.spec, canon.lookup(), l.bytes);
  return l;
}

struct Source {
  std::string tensor;
  int64_t row, col;
};

/// Independent statement of the sharding rules of the brief: where runtime element (row, col) of `storage` on
/// `rank` comes from.
Source oracle(const ModelDims& d, int tp, int rank, const std::string& storage, int64_t row, int64_t col) {
  const int64_t hd = d.head_dim, q_local = d.heads / tp * hd, vr = d.vocab / tp, ir = d.intermediate / tp;
  const int64_t kv_local = (tp <= d.kv_heads ? d.kv_heads / tp : 1) * hd;
  const int64_t kv_start = (tp <= d.kv_heads ? rank * (d.kv_heads / tp) : rank / (tp / d.kv_heads)) * hd;
  auto ends_with = [&](const std::string& s) {
    return storage.size() >= s.size() && storage.compare(storage.size() - s.size(), s.size(), s) == 0;
  };
  if (storage == "model.embed_tokens.weight") return {storage, rank * vr + row, col};
  if (storage == "lm_head.weight")
    return {d.tie_embeddings ? "model.embed_tokens.weight" : storage, rank * vr + row, col};
  if (ends_with("norm.weight")) return {storage, 0, col};
  if (ends_with("qkv_proj.weight")) {
    const std::string attn = storage.substr(0, storage.size() - std::string("qkv_proj.weight").size());
    if (row < q_local) return {attn + "q_proj.weight", rank * q_local + row, col};
    if (row < q_local + kv_local) return {attn + "k_proj.weight", kv_start + row - q_local, col};
    return {attn + "v_proj.weight", kv_start + row - q_local - kv_local, col};
  }
  if (ends_with("o_proj.weight")) return {storage, row, rank * q_local + col};
  if (ends_with("gate_up_proj.weight")) {
    const std::string mlp = storage.substr(0, storage.size() - std::string("gate_up_proj.weight").size());
    if (row < ir) return {mlp + "gate_proj.weight", rank * ir + row, col};
    return {mlp + "up_proj.weight", rank * ir + row - ir, col};
  }
  if (ends_with("down_proj.weight")) return {storage, row, rank * ir + col};
  ADD_FAILURE() << "unknown storage " << storage;
  return {};
}

TEST(TpLayout, StorageNamesAndShapes) {
  ModelProfile p = test_profile();
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].rank, 1);
  EXPECT_EQ(l[1].tp, 2);
  const std::vector<std::pair<std::string, Shape>> want = {
      {"model.embed_tokens.weight", {128, 16}},
      {"model.layers.0.input_layernorm.weight", {16}},
      {"model.layers.0.self_attn.qkv_proj.weight", {32, 16}},  // 4 q heads + 2 k heads + 2 v heads, head_dim 4
      {"model.layers.0.self_attn.o_proj.weight", {16, 16}},
      {"model.layers.0.post_attention_layernorm.weight", {16}},
      {"model.layers.0.mlp.gate_up_proj.weight", {32, 16}},
      {"model.layers.0.mlp.down_proj.weight", {16, 16}},
      {"model.layers.1.input_layernorm.weight", {16}},
  };
  ASSERT_EQ(l[1].storages.size(), 1u + 6u * 2u + 2u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(l[1].storages[i].name, want[i].first);
    EXPECT_EQ(l[1].storages[i].shape, want[i].second) << want[i].first;
    EXPECT_EQ(l[1].storages[i].dtype, DType::BF16);
    EXPECT_EQ(l[1].storages[i].transform, "none");
  }
  EXPECT_EQ(l[1].storages[13].name, "model.norm.weight");
  EXPECT_EQ(l[1].storages[14].name, "lm_head.weight");
  EXPECT_EQ(l[1].storages[14].shape, (Shape{128, 16}));
  const RuntimeStorageSpec& qkv = l[1].storages[2];
  ASSERT_EQ(qkv.fragments.size(), 3u);
  EXPECT_EQ(qkv.fragments[1].canonical, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(qkv.fragments[1].start, 8);
  EXPECT_EQ(qkv.fragments[1].length, 8);
  EXPECT_EQ(qkv.fragments[1].shape(), (Shape{8, 16}));
  const RuntimeStorageSpec& o = l[1].storages[3];
  EXPECT_EQ(o.fragments[0].dim, 1);
  EXPECT_EQ(o.fragments[0].start, 16);
  EXPECT_EQ(l[1].index_of("model.norm.weight"), 13u);
  expect_error([&] { l[1].index_of("model.layers.0.self_attn.q_proj.weight"); }, ErrorKind::Missing,
               {"'model.layers.0.self_attn.q_proj.weight'", "rank 1 of 2"});
}

TEST(TpLayout, LiteralElementsAtTp2) {
  ModelProfile p = test_profile();
  Canonical canon(p);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  const std::string a = "model.layers.1.self_attn.", m = "model.layers.1.mlp.";
  Loaded qkv = load(l[1], a + "qkv_proj.weight", canon);
  EXPECT_EQ(qkv.at(0, 0), canon.at(a + "q_proj.weight", 16, 0));
  EXPECT_EQ(qkv.at(15, 9), canon.at(a + "q_proj.weight", 31, 9));
  EXPECT_EQ(qkv.at(16, 3), canon.at(a + "k_proj.weight", 8, 3));
  EXPECT_EQ(qkv.at(23, 15), canon.at(a + "k_proj.weight", 15, 15));
  EXPECT_EQ(qkv.at(24, 0), canon.at(a + "v_proj.weight", 8, 0));
  EXPECT_EQ(qkv.at(31, 15), canon.at(a + "v_proj.weight", 15, 15));
  Loaded q0 = load(l[0], a + "qkv_proj.weight", canon);
  EXPECT_EQ(q0.at(16, 3), canon.at(a + "k_proj.weight", 0, 3));
  Loaded o = load(l[1], a + "o_proj.weight", canon);
  EXPECT_EQ(o.at(5, 2), canon.at(a + "o_proj.weight", 5, 18));
  EXPECT_EQ(o.at(15, 15), canon.at(a + "o_proj.weight", 15, 31));
  Loaded gu = load(l[1], m + "gate_up_proj.weight", canon);
  EXPECT_EQ(gu.at(0, 1), canon.at(m + "gate_proj.weight", 16, 1));
  EXPECT_EQ(gu.at(16, 1), canon.at(m + "up_proj.weight", 16, 1));
  EXPECT_EQ(gu.at(31, 15), canon.at(m + "up_proj.weight", 31, 15));
  Loaded down = load(l[1], m + "down_proj.weight", canon);
  EXPECT_EQ(down.at(3, 0), canon.at(m + "down_proj.weight", 3, 16));
  Loaded embed = load(l[1], "model.embed_tokens.weight", canon);
  EXPECT_EQ(embed.at(0, 0), canon.at("model.embed_tokens.weight", 128, 0));
  Loaded head = load(l[1], "lm_head.weight", canon);
  EXPECT_EQ(head.at(127, 15), canon.at("lm_head.weight", 255, 15));
  Loaded norm = load(l[1], "model.layers.1.post_attention_layernorm.weight", canon);
  EXPECT_EQ(norm.bytes, canon.bytes.at("model.layers.1.post_attention_layernorm.weight"));
}

TEST(TpLayout, KvHeadsReplicatedWhenTpExceedsKvHeads) {
  ModelProfile p = test_profile();  // 8 heads, 4 kv heads
  Canonical canon(p);
  std::vector<RankLayout> l = build_rank_layouts(p, 8);
  const std::string a = "model.layers.0.self_attn.";
  // Rank 5 holds q head 5 and kv head 5 / (8 / 4) = 2 (rows 8..11 of k_proj and v_proj).
  Loaded r5 = load(l[5], a + "qkv_proj.weight", canon);
  ASSERT_EQ(r5.spec.shape, (Shape{12, 16}));
  EXPECT_EQ(r5.at(0, 0), canon.at(a + "q_proj.weight", 20, 0));
  EXPECT_EQ(r5.at(4, 7), canon.at(a + "k_proj.weight", 8, 7));
  EXPECT_EQ(r5.at(11, 15), canon.at(a + "v_proj.weight", 11, 15));
  Loaded r4 = load(l[4], a + "qkv_proj.weight", canon);
  EXPECT_EQ(r4.at(0, 0), canon.at(a + "q_proj.weight", 16, 0));
  // Ranks 4 and 5 share kv head 2: identical k/v rows (bytes 4*16*2 onward).
  EXPECT_TRUE(std::equal(r4.bytes.begin() + 128, r4.bytes.end(), r5.bytes.begin() + 128));
  Loaded r7 = load(l[7], a + "qkv_proj.weight", canon);
  EXPECT_EQ(r7.at(4, 0), canon.at(a + "k_proj.weight", 12, 0));
}

TEST(TpLayout, EveryElementTracesToItsCanonicalSource) {
  for (bool tied : {false, true}) {
    ModelProfile p = test_profile(tied);
    Canonical canon(p);
    for (int tp : {1, 2, 4, 8}) {
      std::vector<RankLayout> layouts = build_rank_layouts(p, tp);
      for (const RankLayout& layout : layouts) {
        for (const RuntimeStorageSpec& spec : layout.storages) {
          Loaded s = load(layout, spec.name, canon);
          for (int64_t r = 0; r < s.rows(); ++r)
            for (int64_t c = 0; c < s.cols(); ++c) {
              Source src = oracle(p.dims, tp, layout.rank, spec.name, r, c);
              ASSERT_EQ(s.at(r, c), canon.at(src.tensor, src.row, src.col))
                  << "tp=" << tp << " rank=" << layout.rank << " " << spec.name << " [" << r << "," << c << "]";
            }
        }
      }
    }
  }
}

TEST(TpLayout, TiedLmHeadReadsEmbedRows) {
  ModelProfile p = test_profile(true);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  const RuntimeStorageSpec& head = l[1].storages.back();
  EXPECT_EQ(head.name, "lm_head.weight");
  ASSERT_EQ(head.fragments.size(), 1u);
  EXPECT_EQ(head.fragments[0].canonical, "model.embed_tokens.weight");
  EXPECT_EQ(head.fragments[0].start, 128);
}

TEST(TpLayout, ErrorsNameTheDimension) {
  expect_error([] { build_rank_layouts(test_profile(), 3); }, ErrorKind::Mismatch,
               {"profile 'layout-test'", "tp=3 does not divide heads (8)"});
  expect_error([] { build_rank_layouts(test_profile(false, 8, 4, 30), 4); }, ErrorKind::Mismatch,
               {"tp=4 does not divide intermediate (30)"});
  expect_error([] { build_rank_layouts(test_profile(false, 8, 4, 32, 260), 8); }, ErrorKind::Mismatch,
               {"tp=8 does not divide vocab (260)"});
  expect_error([] { build_rank_layouts(test_profile(false, 12, 6), 4); }, ErrorKind::Mismatch,
               {"tp=4 does not divide kv_heads (6)"});
  expect_error([] { build_rank_layouts(test_profile(false, 12, 4), 6); }, ErrorKind::Mismatch,
               {"kv_heads (4) does not divide tp=6"});
  expect_error([] { build_rank_layouts(test_profile(), 0); }, ErrorKind::Mismatch, {"tp must be >= 1, got 0"});
}

TEST(TpLayout, LoadStorageErrors) {
  ModelProfile p = test_profile();
  Canonical canon(p);
  std::vector<RankLayout> l = build_rank_layouts(p, 2);
  RuntimeStorageSpec qkv = l[0].storages[2];
  std::vector<uint8_t> out(qkv.bytes());
  std::vector<uint8_t> short_k(10);
  CanonicalLookup bad = [&](const std::string& name) {
    if (name == "model.layers.0.self_attn.k_proj.weight") return std::span<const uint8_t>(short_k);
    return std::span<const uint8_t>(canon.bytes.at(name));
  };
  expect_error([&] { load_storage(qkv, bad, out); }, ErrorKind::Mismatch,
               {"canonical tensor 'model.layers.0.self_attn.k_proj.weight' has 10 bytes", "BF16 [16, 16] needs 512",
                "storage 'model.layers.0.self_attn.qkv_proj.weight'"});
  std::vector<uint8_t> small(qkv.bytes() - 2);
  expect_error([&] { load_storage(qkv, canon.lookup(), small); }, ErrorKind::Mismatch,
               {"storage 'model.layers.0.self_attn.qkv_proj.weight': output buffer has 1022 bytes", "needs 1024"});
  qkv.transform = "nvfp4_swizzle";
  expect_error([&] { load_storage(qkv, canon.lookup(), out); }, ErrorKind::Format,
               {"storage 'model.layers.0.self_attn.qkv_proj.weight'", "'nvfp4_swizzle'"});
}

uint64_t total_bytes(const std::vector<RankLayout>& layouts) {
  uint64_t t = 0;
  for (const RankLayout& l : layouts) t += l.bytes();
  return t;
}

TEST(TpLayout, Llama31_8bRankBytes) {
  ModelProfile p = find_profile("llama-3.1-8b-bf16", WSBENCH_PROFILES_DIR);
  const uint64_t canonical = 16'060'522'496ull;
  const uint64_t norms = 65ull * 4096 * 2;  // 2 per layer + final norm, replicated on every rank
  std::vector<RankLayout> l1 = build_rank_layouts(p, 1);
  EXPECT_EQ(l1[0].bytes(), canonical);
  std::vector<RankLayout> l2 = build_rank_layouts(p, 2);
  EXPECT_EQ(l2[0].bytes(), 8'030'527'488ull);
  EXPECT_EQ(l2[1].bytes(), 8'030'527'488ull);
  EXPECT_EQ(total_bytes(l2), canonical + norms);
  std::vector<RankLayout> l4 = build_rank_layouts(p, 4);
  EXPECT_EQ(l4[3].bytes(), 4'015'529'984ull);
  EXPECT_EQ(total_bytes(l4), canonical + 3 * norms);
  std::vector<RankLayout> l8 = build_rank_layouts(p, 8);  // 8 kv heads: no replication yet
  EXPECT_EQ(l8[7].bytes(), 2'008'031'232ull);
  EXPECT_EQ(total_bytes(l8), canonical + 7 * norms);
}

TEST(TpLayout, TinyRankBytes) {
  ModelProfile p = find_profile("llama-tiny-bf16", WSBENCH_PROFILES_DIR);
  EXPECT_EQ(build_rank_layouts(p, 1)[0].bytes(), 853'248u);
  EXPECT_EQ(build_rank_layouts(p, 2)[1].bytes(), 427'264u);
  EXPECT_EQ(build_rank_layouts(p, 4)[3].bytes(), 214'272u);
  // tp=8 > 4 kv heads: each kv head (k and v, 16 x 128 BF16 per layer) is held by two ranks.
  std::vector<RankLayout> l8 = build_rank_layouts(p, 8);
  EXPECT_EQ(l8[0].bytes(), 115'968u);
  EXPECT_EQ(total_bytes(l8), 853'248u + 7u * 5u * 256u + 2u * 2u * 4u * 16u * 128u * 2u);
}

}  // namespace
}  // namespace wsb
