// The gpt_oss reference forward against transformers: the tests/fixtures/hf-gpt_oss-tiny checkpoint (BF16 experts,
// written by transformers' own save_pretrained, tests/fixtures/make_hf_tiny.py) and hf-gpt_oss-tiny-mxfp4 (the same
// weights quantized to MXFP4 in the openai/gpt-oss layout), loaded through CheckpointReader and the TP layout, give
// transformers' float32 teacher-forced logits (expected_logits.json) to 1e-5 at TP 1, 2 and 4. The fixtures cover
// what synthetic weights cannot pin: YaRN RoPE with its attention factor, sinks, the sliding window of layer 0, the
// gate/up interleave of the experts and the clamped SwiGLU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/checkpoint/checkpoint.hpp"
#include "models/forward/forward.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/moe_forward_test_util.hpp"

namespace wsb {
namespace {

const std::filesystem::path kFixtures = WSBENCH_FIXTURES_DIR;

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// A wsbench profile of a transformers GptOssConfig config.json (keys of configuration_gpt_oss.py; rope_parameters
/// as transformers 5 writes it), quantization from its quantization_config. Built here from the keys, so the test
/// does not depend on how profile_from_hf_dir reads them.
ModelProfile gpt_oss_profile_of(const std::filesystem::path& dir) {
  const nlohmann::json c = read_json(dir / "config.json");
  const nlohmann::json& rope = c.at("rope_parameters");
  EXPECT_EQ(rope.at("rope_type"), "yarn");
  EXPECT_EQ(c.at("layer_types"), nlohmann::json::parse(R"(["sliding_attention", "full_attention"])"));
  nlohmann::json p = {
      {"id", "hf-" + dir.filename().string()},
      {"family", "gpt_oss"},
      {"description", "transformers-made tiny gpt_oss fixture"},
      {"source", (dir / "config.json").string()},
      {"quantization", c.contains("quantization_config") ? c.at("quantization_config").at("quant_method") : "none"},
      {"dtype", "BF16"},
      {"tiny", true},
      {"dims",
       {{"layers", c.at("num_hidden_layers")},
        {"hidden", c.at("hidden_size")},
        {"intermediate", c.at("intermediate_size")},
        {"experts", c.at("num_local_experts")},
        {"top_k", c.at("num_experts_per_tok")},
        {"heads", c.at("num_attention_heads")},
        {"kv_heads", c.at("num_key_value_heads")},
        {"head_dim", c.at("head_dim")},
        {"vocab", c.at("vocab_size")},
        {"rope_theta", rope.at("rope_theta")},
        {"rms_eps", c.at("rms_norm_eps")},
        {"sliding_window", c.at("sliding_window")},
        {"swiglu_limit", c.at("swiglu_limit")},
        {"rope_scaling",
         {{"type", "yarn"},
          {"factor", rope.at("factor")},
          {"original_max_position_embeddings", rope.at("original_max_position_embeddings")},
          {"beta_fast", rope.at("beta_fast")},
          {"beta_slow", rope.at("beta_slow")},
          {"truncate", rope.at("truncate")}}}}}};
  return parse_profile(p, (dir / "config.json").string());
}

/// Max |logit - transformers| over every position and token of the fixture's sequence at `tp`.
double max_error(const std::string& fixture, int tp) {
  const std::filesystem::path dir = kFixtures / fixture;
  const ModelProfile p = gpt_oss_profile_of(dir);
  CheckpointReader reader(dir);
  // The profile names exactly the checkpoint's tensors, with their dtypes and shapes.
  std::vector<std::string> names;
  for (const TensorSpec& t : p.canonical_tensors()) {
    names.push_back(t.name);
    EXPECT_EQ(reader.entry(t.name).dtype, t.dtype) << t.name;
    EXPECT_EQ(reader.entry(t.name).shape, t.shape) << t.name;
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, reader.tensor_names());
  test::RankImages images(p, tp, [&](const std::string& name) { return reader.data(name); });
  std::vector<RankStorageView> views = images.views();
  auto model = make_forward(p, images.layouts, views);
  const nlohmann::json want = read_json(dir / "expected_logits.json");
  const auto sequence = want.at("sequence").get<std::vector<int32_t>>();
  const auto logits = want.at("logits").get<std::vector<std::vector<double>>>();
  EXPECT_EQ(sequence.size(), 22u);
  auto seq = model->new_sequence();
  std::vector<float> got;
  double worst = 0.0;
  for (size_t t = 0; t < sequence.size(); ++t) {
    model->step(*seq, sequence[t], got);
    EXPECT_EQ(got.size(), 256u);
    for (size_t v = 0; v < got.size(); ++v) worst = std::max(worst, std::abs(got[v] - logits[t][v]));
  }
  return worst;
}

class GptOssTransformers : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(GptOssTransformers, LogitsMatchWithin1e5) {
  const auto& [fixture, tp] = GetParam();
  const double err = max_error(fixture, tp);
  EXPECT_LE(err, 1e-5) << fixture << " tp " << tp;
  std::printf("%s tp=%d max |logit - transformers| = %.3g\n", fixture.c_str(), tp, err);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GptOssTransformers,
                         ::testing::Combine(::testing::Values(std::string("hf-gpt_oss-tiny"),
                                                              std::string("hf-gpt_oss-tiny-mxfp4")),
                                            ::testing::Values(1, 2, 4)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace wsb
