// teacher_forced_logits on both backends against transformers' logits of the transformers-made fixtures
// (expected_logits.json, max |dlogit| <= 1e-5) at TP 1, 2 and 4; the CUDA backend (device storages, captured decode
// graphs) also against the CPU backend. The CUDA cases skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/teacher_forced.hpp"
#include "tests/support/gpu_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

constexpr double kTolerance = 1e-5;

struct Case {
  std::string fixture;
  std::string backend;
  int tp;
};

class TeacherForced : public ::testing::TestWithParam<Case> {};

TEST_P(TeacherForced, MatchesTransformers) {
  const Case& c = GetParam();
  if (c.backend == "cuda") WSBENCH_REQUIRE_GPU();
  const fs::path dir = fs::path(WSBENCH_FIXTURES_DIR) / c.fixture;
  std::ifstream in(dir / "expected_logits.json");
  const nlohmann::json want = nlohmann::json::parse(in);
  const auto tokens = want.at("sequence").get<std::vector<int32_t>>();
  const auto expected = want.at("logits").get<std::vector<std::vector<double>>>();
  const ModelProfile profile = profile_from_hf_dir(dir);
  const auto got = teacher_forced_logits(profile, dir, c.tp, c.backend, tokens);
  ASSERT_EQ(got.size(), expected.size());
  double max_err = 0;
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), expected[t].size());
    for (size_t v = 0; v < got[t].size(); ++v) max_err = std::max(max_err, std::abs(got[t][v] - expected[t][v]));
  }
  std::printf("%s %s tp=%d max |logit - transformers| = %.3g\n", c.fixture.c_str(), c.backend.c_str(), c.tp, max_err);
  EXPECT_LE(max_err, kTolerance);
  if (c.backend == "cuda") {
    const auto host = teacher_forced_logits(profile, dir, c.tp, "cpu", tokens);
    double max_diff = 0;
    for (size_t t = 0; t < got.size(); ++t) {
      for (size_t v = 0; v < got[t].size(); ++v) max_diff = std::max(max_diff, double(std::abs(got[t][v] - host[t][v])));
    }
    std::printf("%s cuda vs cpu tp=%d max |dlogit| = %.3g\n", c.fixture.c_str(), c.tp, max_diff);
    EXPECT_LE(max_diff, kTolerance);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* fixture :
       {"hf-llama-tiny", "hf-llama-tiny-step1", "hf-glm4_moe-tiny", "hf-glm4_moe-tiny-step1", "hf-glm4_moe-tiny-fp8",
        "hf-glm4_moe-tiny-fp8-step1", "hf-deepseek_v3-tiny", "hf-deepseek_v3-tiny-step1", "hf-gpt_oss-tiny",
        "hf-gpt_oss-tiny-step1", "hf-gpt_oss-tiny-mxfp4", "hf-kimi-tiny-nvfp4"}) {
    for (const char* backend : {"cpu", "cuda"}) {
      for (int tp : {1, 2, 4}) out.push_back({fixture, backend, tp});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TeacherForced, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.fixture + "_" + info.param.backend + "_tp" + std::to_string(info.param.tp);
  for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
});

}  // namespace
}  // namespace wsb
