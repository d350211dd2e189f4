// `wsbench forward`: the teacher-forced logits it writes reproduce transformers' (expected_logits.json of the
// transformers-made fixtures) within 1e-5 at TP 1, 2 and 4, every float reads back to the computed float32 bit for
// bit, and bad input is refused naming the item.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "engine/teacher_forced.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(WSBENCH_FIXTURES_DIR);

/// transformers 5.17 computes in float32 from the same BF16 weights; summation order and libm differ, and the
/// fixture's logits are rounded to 6 decimals. The bound: max |dlogit| <= 1e-5.
constexpr double kTolerance = 1e-5;

struct Expected {
  std::vector<int32_t> sequence;
  std::vector<std::vector<double>> logits;
};

Expected expected_of(const fs::path& dir) {
  std::ifstream in(dir / "expected_logits.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("sequence").get<std::vector<int32_t>>(), j.at("logits").get<std::vector<std::vector<double>>>()};
}

std::string token_list(const std::vector<int32_t>& tokens) { return fmt::format("{}", fmt::join(tokens, ",")); }

nlohmann::json run_forward(const fs::path& checkpoint, const std::vector<int32_t>& tokens, int tp, const fs::path& out) {
  ForwardArgs args;
  args.checkpoint = checkpoint;
  args.tokens = token_list(tokens);
  args.tp = tp;
  args.json = out;
  EXPECT_EQ(cmd_forward(args), 0);
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

class ForwardCommand : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ForwardCommand, MatchesTransformersLogits) {
  const auto& [name, tp] = GetParam();
  const fs::path dir = kFixtures / name;
  test::TempDir tmp;
  const Expected want = expected_of(dir);
  const nlohmann::json got = run_forward(dir, want.sequence, tp, tmp / "logits.json");
  EXPECT_EQ(got["checkpoint"], dir.string());
  EXPECT_EQ(got["model"], "hf:" + name);
  EXPECT_EQ(got["backend"], "cpu");
  EXPECT_EQ(got["tp"], tp);
  EXPECT_EQ(got["tokens"], nlohmann::json(want.sequence));
  ASSERT_EQ(got["logits"].size(), want.logits.size());
  double max_err = 0;
  for (size_t t = 0; t < want.logits.size(); ++t) {
    ASSERT_EQ(got["logits"][t].size(), want.logits[t].size());
    for (size_t v = 0; v < want.logits[t].size(); ++v) {
      max_err = std::max(max_err, std::abs(got["logits"][t][v].get<double>() - want.logits[t][v]));
    }
  }
  std::printf("%s tp=%d max |logit - transformers| = %.3g\n", name.c_str(), tp, max_err);
  EXPECT_LE(max_err, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ForwardCommand,
                         ::testing::Combine(::testing::Values("hf-llama-tiny", "hf-llama-tiny-step1"),
                                            ::testing::Values(1, 2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(ForwardCommandOutput, EveryFloatReadsBackBitForBit) {
  const fs::path dir = kFixtures / "hf-llama-tiny";
  test::TempDir tmp;
  const std::vector<int32_t> tokens{1, 17, 42, 255, 0};
  const nlohmann::json got = run_forward(dir, tokens, 2, tmp / "logits.json");
  const auto computed = teacher_forced_logits(profile_from_hf_dir(dir), dir, 2, "cpu", tokens);
  ASSERT_EQ(got["logits"].size(), 5u);
  for (size_t t = 0; t < computed.size(); ++t) {
    ASSERT_EQ(got["logits"][t].size(), 256u);
    for (size_t v = 0; v < computed[t].size(); ++v) {
      const float back = static_cast<float>(got["logits"][t][v].get<double>());
      uint32_t a = 0, b = 0;
      std::memcpy(&a, &back, 4);
      std::memcpy(&b, &computed[t][v], 4);
      ASSERT_EQ(a, b) << t << " " << v;
    }
  }
  EXPECT_FALSE(fs::exists(tmp / "logits.json.tmp"));
}

TEST(ForwardCommandOutput, BadInputIsRefusedNamingIt) {
  EXPECT_EQ(parse_token_list("1, 17,42"), (std::vector<int32_t>{1, 17, 42}));
  EXPECT_EQ(test::error_message([] { parse_token_list("1,,3"); }, ErrorKind::Format),
            "--tokens: item 2 '' is not a token id (a comma-separated list of integers, e.g. 1,17,42)");
  EXPECT_EQ(test::error_message([] { parse_token_list("1,2.5"); }, ErrorKind::Format),
            "--tokens: item 2 '2.5' is not a token id (a comma-separated list of integers, e.g. 1,17,42)");
  EXPECT_EQ(test::error_message([] { parse_token_list("99999999999"); }, ErrorKind::Format),
            "--tokens: item 1 '99999999999' is not a token id (a comma-separated list of integers, e.g. 1,17,42)");
  const fs::path dir = kFixtures / "hf-llama-tiny";
  const ModelProfile profile = profile_from_hf_dir(dir);
  const std::vector<int32_t> outside{1, 256};
  EXPECT_EQ(test::error_message([&] { teacher_forced_logits(profile, dir, 1, "cpu", outside); }, ErrorKind::Format),
            "profile 'hf:hf-llama-tiny': token id 256 is outside the vocabulary [0, 256)");
  const std::vector<int32_t> one{1};
  EXPECT_EQ(test::error_message([&] { teacher_forced_logits(profile, dir, 1, "cpu", {}); }, ErrorKind::Format),
            "forward: the token sequence is empty");
  EXPECT_EQ(test::error_message([&] { teacher_forced_logits(profile, dir, 1, "tpu", one); }, ErrorKind::Format),
            "forward: backend 'tpu' is unknown (expected \"cpu\" or \"cuda\")");
  EXPECT_EQ(test::error_message([&] { teacher_forced_logits(profile, dir, 3, "cpu", one); }, ErrorKind::Mismatch),
            "profile 'hf:hf-llama-tiny': tp=3 does not divide heads (4)");
  // A checkpoint that is not the profile: the tensor is named before any forward runs.
  const fs::path other = kFixtures / "hf-llama-tiny-step1";
  ModelProfile wider = profile;
  wider.dims.intermediate = 128;
  EXPECT_EQ(test::error_message([&] { teacher_forced_logits(wider, other, 1, "cpu", one); }, ErrorKind::Mismatch),
            fmt::format("{}: tensor 'model.layers.0.mlp.gate_proj.weight' is BF16 [96, 64], the model expects BF16 "
                        "[128, 64]",
                        other.string()));
}

}  // namespace
}  // namespace wsb
