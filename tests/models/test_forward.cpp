// Reference forward pass: reproduces transformers' float32 logits on the tests/fixtures/hf-llama-tiny checkpoint
// (loaded through profile_from_hf_dir + CheckpointReader + TP layout) at tp 1/2/4, is bitwise deterministic,
// re-reads weights at every step, and rejects mismatched inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "models/checkpoint/checkpoint.hpp"
#include "core/errors.hpp"
#include "core/numeric.hpp"
#include "models/forward/forward.hpp"
#include "tests/models/moe_forward_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kHfTiny = std::filesystem::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";

using test::expect_error;
using test::RankImages;

struct Expected {
  std::vector<int32_t> sequence;
  std::vector<std::vector<float>> logits;
  std::vector<double> margin;
};

Expected expected_logits() {
  std::ifstream in(kHfTiny / "expected_logits.json");
  nlohmann::json j = nlohmann::json::parse(in);
  Expected e;
  e.sequence = j.at("sequence").get<std::vector<int32_t>>();
  e.logits = j.at("logits").get<std::vector<std::vector<float>>>();
  e.margin = j.at("top2_margin").get<std::vector<double>>();
  return e;
}

/// transformers 5.17 computes in float32 from the same bf16 weights; the remaining differences come from
/// summation order (BLAS vs index order) and libm (pow/cos/exp), and expected_logits.json rounds to 6 decimals
/// (5e-7). Observed max error: about 7e-7 at tp 1, 2 and 4.
constexpr double kHfTolerance = 1e-5;

double run_hf_fixture(int tp) {
  ModelProfile p = profile_from_hf_dir(kHfTiny);
  CheckpointReader reader(kHfTiny);
  RankImages images(p, tp, [&](const std::string& name) { return reader.data(name); });
  std::vector<RankStorageView> views = images.views();
  auto model = make_forward(p, images.layouts, views);
  EXPECT_EQ(model->vocab(), 256);
  Expected want = expected_logits();
  EXPECT_EQ(want.sequence.size(), 22u);
  auto seq = model->new_sequence();
  std::vector<float> logits;
  double max_err = 0.0;
  for (size_t t = 0; t < want.sequence.size(); ++t) {
    EXPECT_EQ(seq->position(), static_cast<int64_t>(t));
    model->step(*seq, want.sequence[t], logits);
    EXPECT_EQ(logits.size(), 256u);
    size_t argmax = 0, want_argmax = 0;
    for (size_t v = 0; v < logits.size(); ++v) {
      max_err = std::max(max_err, std::abs(static_cast<double>(logits[v]) - want.logits[t][v]));
      EXPECT_NEAR(logits[v], want.logits[t][v], kHfTolerance) << "tp=" << tp << " position " << t << " token " << v;
      if (logits[v] > logits[argmax]) argmax = v;
      if (want.logits[t][v] > want.logits[t][want_argmax]) want_argmax = v;
    }
    if (want.margin[t] > 10 * kHfTolerance) {
      EXPECT_EQ(argmax, want_argmax) << "position " << t;
    }
  }
  return max_err;
}

TEST(Forward, MatchesTransformersLogitsTp1) {
  double err = run_hf_fixture(1);
  std::printf("hf-llama-tiny tp=1 max |logit - transformers| = %.3g\n", err);
}

TEST(Forward, MatchesTransformersLogitsTp2) {
  double err = run_hf_fixture(2);
  std::printf("hf-llama-tiny tp=2 max |logit - transformers| = %.3g\n", err);
}

TEST(Forward, MatchesTransformersLogitsTp4KvReplicated) {
  double err = run_hf_fixture(4);  // 2 kv heads: each replicated on 2 ranks
  std::printf("hf-llama-tiny tp=4 max |logit - transformers| = %.3g\n", err);
}

/// Synthetic BF16 weights: uniform in [-0.125, 0.125), norms in [0.75, 1.25); deterministic per tensor name.
std::map<std::string, std::vector<uint8_t>> synthetic_weights(const ModelProfile& p) {
  std::map<std::string, std::vector<uint8_t>> out;
  uint64_t state = 0x1234567;
  for (const TensorSpec& t : p.canonical_tensors()) {
    const bool is_norm = t.shape.size() == 1;
    std::vector<uint8_t> b(t.bytes());
    for (uint64_t i = 0; i < t.numel(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = static_cast<float>(state >> 40) / static_cast<float>(1ull << 24) - 0.5f;
      const uint16_t code = float_to_bf16(is_norm ? 1.0f + 0.5f * u : 0.25f * u);
      std::memcpy(&b[i * 2], &code, 2);
    }
    out[t.name] = std::move(b);
  }
  return out;
}

std::vector<std::vector<float>> run(const ForwardModel& model, const std::vector<int32_t>& tokens) {
  auto seq = model.new_sequence();
  std::vector<std::vector<float>> all;
  for (int32_t t : tokens) {
    all.emplace_back();
    model.step(*seq, t, all.back());
  }
  return all;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

class TinyForward : public ::testing::Test {
 protected:
  ModelProfile profile = find_profile("llama-tiny-bf16", WSBENCH_PROFILES_DIR);
  std::map<std::string, std::vector<uint8_t>> weights = synthetic_weights(profile);
  CanonicalLookup lookup = [this](const std::string& n) { return std::span<const uint8_t>(weights.at(n)); };
  std::vector<int32_t> tokens = tokenize_bytes("The quick brown fox jumps over the lazy dog. 0123456789");
};

TEST_F(TinyForward, BitwiseDeterministicAcrossInstancesAndSequences) {
  RankImages images(profile, 2, lookup);
  std::vector<RankStorageView> views = images.views();
  auto a = make_forward(profile, images.layouts, views);
  auto b = make_forward(profile, images.layouts, views);
  auto ra = run(*a, tokens);
  auto rb = run(*b, tokens);
  EXPECT_TRUE(bitwise_equal(ra, rb));
  // Two sequences stepped alternately on one model: each is computed alone (batch invariance).
  auto s1 = a->new_sequence();
  auto s2 = a->new_sequence();
  std::vector<std::vector<float>> r1, r2;
  for (int32_t t : tokens) {
    r1.emplace_back();
    a->step(*s1, t, r1.back());
    r2.emplace_back();
    a->step(*s2, t, r2.back());
  }
  EXPECT_TRUE(bitwise_equal(ra, r1));
  EXPECT_TRUE(bitwise_equal(ra, r2));
  EXPECT_EQ(s1->position(), static_cast<int64_t>(tokens.size()));
}

TEST_F(TinyForward, TpDegreesAgreeClosely) {
  std::vector<std::vector<std::vector<float>>> results;
  for (int tp : {1, 2, 4, 8}) {
    RankImages images(profile, tp, lookup);
    std::vector<RankStorageView> views = images.views();
    results.push_back(run(*make_forward(profile, images.layouts, views), tokens));
  }
  // Same math, only the rank-order reduction of partial sums regroups float32 additions.
  for (size_t k = 1; k < results.size(); ++k)
    for (size_t t = 0; t < tokens.size(); ++t)
      for (size_t v = 0; v < 512; ++v) ASSERT_NEAR(results[k][t][v], results[0][t][v], 1e-4) << k << " " << t;
  EXPECT_FALSE(bitwise_equal(results[0], results[1]));  // regrouping is visible, so tp really changes the sums
}

TEST_F(TinyForward, WeightChangeShowsAtNextStep) {
  RankImages images(profile, 2, lookup);
  std::vector<RankStorageView> views = images.views();
  auto model = make_forward(profile, images.layouts, views);
  const auto before = run(*model, tokens);
  std::vector<uint8_t>& qkv = images.storage(1, "model.layers.0.self_attn.qkv_proj.weight");
  const size_t row_bytes = 128 * 2;
  const size_t q_byte = 3 * row_bytes + 10;       // low byte of q row 3, column 5 (rank 1's q heads)
  const size_t k_byte = 4 * 16 * row_bytes + 20;  // low byte of k row 0 (after 4 q heads x head_dim 16)

  // Mid-sequence: the model re-reads its storages, so the step right after the flip differs.
  auto seq = model->new_sequence();
  std::vector<float> logits;
  for (size_t t = 0; t < 5; ++t) {
    model->step(*seq, tokens[t], logits);
    ASSERT_EQ(std::memcmp(logits.data(), before[t].data(), 512 * sizeof(float)), 0);
  }
  qkv[q_byte] ^= 0xFF;
  model->step(*seq, tokens[5], logits);
  EXPECT_NE(std::memcmp(logits.data(), before[5].data(), 512 * sizeof(float)), 0);
  qkv[q_byte] ^= 0xFF;
  EXPECT_TRUE(bitwise_equal(before, run(*model, tokens)));

  // A k change cannot move position 0 (softmax over one score is 1) but shows from position 1 on.
  qkv[k_byte] ^= 0xFF;
  const auto k_changed = run(*model, tokens);
  EXPECT_EQ(std::memcmp(before[0].data(), k_changed[0].data(), 512 * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(before[1].data(), k_changed[1].data(), 512 * sizeof(float)), 0);
}

TEST_F(TinyForward, F32WeightsGiveTheSameLogitsAsTheirBf16Values) {
  RankImages bf16(profile, 2, lookup);
  std::vector<RankStorageView> bf16_views = bf16.views();
  const auto want = run(*make_forward(profile, bf16.layouts, bf16_views), tokens);

  ModelProfile f32 = profile;
  f32.dtype = DType::F32;
  std::map<std::string, std::vector<uint8_t>> wide;
  for (const auto& [name, b] : weights) {
    std::vector<uint8_t>& w = wide[name];
    w.resize(b.size() * 2);
    for (size_t i = 0; i < b.size() / 2; ++i) {
      uint16_t code;
      std::memcpy(&code, &b[2 * i], 2);
      const float v = bf16_to_float(code);  // widening is exact, so the float32 math sees identical inputs
      std::memcpy(&w[4 * i], &v, 4);
    }
  }
  RankImages images(f32, 2, [&](const std::string& n) { return std::span<const uint8_t>(wide.at(n)); });
  std::vector<RankStorageView> views = images.views();
  EXPECT_TRUE(bitwise_equal(want, run(*make_forward(f32, images.layouts, views), tokens)));
}

TEST_F(TinyForward, RejectsMismatchedInputs) {
  RankImages images(profile, 2, lookup);
  std::vector<RankStorageView> views = images.views();
  std::vector<RankStorageView> one_view(views.begin(), views.begin() + 1);
  expect_error([&] { make_forward(profile, images.layouts, one_view); }, ErrorKind::Mismatch,
               {"llama-tiny-bf16", "2 rank layouts but 1 storage views"});
  std::vector<RankStorageView> short_view = views;
  short_view[1].storages[2] = short_view[1].storages[2].first(10);
  expect_error([&] { make_forward(profile, images.layouts, short_view); }, ErrorKind::Mismatch,
               {"rank 1 storage 'model.layers.0.self_attn.qkv_proj.weight': view has 10 bytes"});
  ModelProfile other = scale_profile(profile, ProfileScale{1});
  expect_error([&] { make_forward(other, images.layouts, views); }, ErrorKind::Mismatch,
               {"llama-tiny-bf16@layers=1", "rank 0"});
  ModelProfile gpt = profile;
  gpt.family = "gpt2";
  expect_error([&] { make_forward(gpt, images.layouts, views); }, ErrorKind::Format, {"family 'gpt2'"});

  auto model = make_forward(profile, images.layouts, views);
  auto twin = make_forward(profile, images.layouts, views);
  auto seq = model->new_sequence();
  std::vector<float> logits;
  expect_error([&] { model->step(*seq, 512, logits); }, ErrorKind::Format, {"token id 512", "[0, 512)"});
  expect_error([&] { model->step(*seq, -1, logits); }, ErrorKind::Format, {"token id -1"});
  expect_error([&] { twin->step(*seq, 1, logits); }, ErrorKind::Mismatch, {"another forward model"});
  EXPECT_EQ(seq->position(), 0);
}

TEST(Tokenizer, BytesRoundTrip) {
  EXPECT_EQ(tokenize_bytes("hi\xff"), (std::vector<int32_t>{104, 105, 255}));
  EXPECT_EQ(tokenize_bytes(""), std::vector<int32_t>{});
  EXPECT_EQ(detokenize({104, 105, 0, 300, 255}), std::string("hi\0<|300|>\xff", 11));
  const std::string text = "caf\xc3\xa9 \n\t!";
  EXPECT_EQ(detokenize(tokenize_bytes(text)), text);
}

}  // namespace
}  // namespace wsb
