// The commands a user with their own checkpoints runs, through the real executable: `wsbench publish
// --from-checkpoints` on the transformers-made AdamW pair (figures printed and written), bad input exiting 2 with the
// file and field or tensor named, `wsbench forward` to stdout, and `wsbench run matrices/checkpoints.json` passing
// every check of every cell in disk, cpu and refit on the CPU engine.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/checkpoint_copy.hpp"
#include "tests/support/file_bytes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kSource = fs::path(WSBENCH_PROFILES_DIR) / ".." / "..";
const fs::path kTiny = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";
const fs::path kStep1 = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny-step1";

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs `wsbench ARGS` with stdout and stderr captured under `dir`.
Outcome wsbench(const std::string& args, const fs::path& dir) {
  const fs::path out = dir / "stdout", err = dir / "stderr";
  const std::string command = fmt::format("'{}/wsbench' --profiles '{}' {} > '{}' 2> '{}'", WSBENCH_BINARY_DIR,
                                          WSBENCH_PROFILES_DIR, args, out.string(), err.string());
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_bytes(out), test::read_bytes(err)};
}

TEST(CheckpointCommands, PublishFromCheckpointsPrintsAndWritesTheFigures) {
  test::TempDir dir;
  const Outcome o = wsbench(fmt::format("publish --from-checkpoints '{}' '{}' --store '{}' --encoding auto --json '{}'",
                                        kTiny.string(), kStep1.string(), (dir / "store").string(),
                                        (dir / "pub.json").string()),
                            dir.path());
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("    BF16     34558 of 125376 elements changed (27.5635%)\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("    BF16     0 of 125376 elements changed (0.0000%)\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("    payload bytes: overwrite 126276, xor 52298 (kept xor)\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(fmt::format("store {} latest -> 000001\n", (dir / "store").string())), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(test::read_bytes(dir / "pub.json"));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["changed_values"], 34558);
  EXPECT_EQ(j[1]["encoding"], "xor");
  EXPECT_EQ(j[1]["payload_bytes"], (nlohmann::json{{"overwrite", 126276}, {"xor", 52298}}));
  EXPECT_EQ(j[1]["source"], kStep1.string());
  EXPECT_DOUBLE_EQ(j[1]["compression_ratio"].get<double>(), 250752.0 / j[1]["stored_bytes"].get<double>());
  // The row of the DELTA: kind, encoding, bytes, ratio, changed elements and density.
  EXPECT_NE(o.out.find(fmt::format("  1        DELTA  xor               250752 {:>14}        4.37        34558   "
                                   "27.5635%",
                                   j[1]["stored_bytes"].get<uint64_t>())),
            std::string::npos)
      << o.out;
}

TEST(CheckpointCommands, BadInputExitsTwoNamingTheFileAndField) {
  test::TempDir dir;
  const fs::path layers = dir / "layers";
  test::copy_checkpoint(kStep1, layers);
  test::edit_config(layers, [](nlohmann::json& c) { c["num_hidden_layers"] = 2; });
  const fs::path type = dir / "type";
  test::copy_checkpoint(kStep1, type);
  test::edit_config(type, [](nlohmann::json& c) { c["model_type"] = "mamba"; });
  const fs::path shard = dir / "shard";
  test::copy_checkpoint(kTiny, shard);
  fs::remove(shard / "model-00001-of-00002.safetensors");
  const fs::path shape = dir / "shape";
  test::copy_checkpoint(kStep1, shape);
  test::edit_checkpoint_tensor(shape, "lm_head.weight", [](test::EditableTensor& t) { t.spec.shape = {128, 128}; });
  const std::string store = (dir / "store").string();
  const std::vector<std::pair<std::string, std::string>> cases{
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}'", kTiny.string(), layers.string(), store),
       // Each directory is checked against its own config.json before the two are compared.
       fmt::format("wsbench: error (mismatch): {0}/model.safetensors: tensor 'model.layers.2.input_layernorm.weight' "
                   "(BF16 [64]) is not part of the llama model {0}/config.json describes\n",
                   layers.string())},
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}'", kTiny.string(), type.string(), store),
       fmt::format("{}/config.json: field 'model_type'", type.string())},
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}'", kTiny.string(), shard.string(), store),
       "model-00001-of-00002.safetensors"},
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}'", kTiny.string(), shape.string(), store),
       fmt::format("wsbench: error (mismatch): {0}/model.safetensors: tensor 'lm_head.weight': expected BF16 [256, 64] "
                   "from {0}/config.json, found BF16 [128, 128]\n",
                   shape.string())},
      {fmt::format("publish --from-checkpoints '{}' --store '{}'", kTiny.string(), store),
       "wsbench: error (format): --from-checkpoints: 1 directory given, at least 2 (FULL v0 from the first, one DELTA "
       "per following one)\n"},
      {fmt::format("publish --model llama-tiny-bf16 --from-checkpoints '{}' '{}' --store '{}'", kTiny.string(),
                   kStep1.string(), store),
       "wsbench: error (format): --model and --from-checkpoints exclude each other (the checkpoints are the model)\n"},
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}' --density 0.1", kTiny.string(), kStep1.string(),
                   store),
       "wsbench: error (format): --density has no meaning with --from-checkpoints (the checkpoints are the versions)\n"},
      {fmt::format("publish --model llama-tiny-bf16 --store '{}' --encoding auto", store),
       "wsbench: error (format): --encoding auto needs --from-checkpoints (synthetic versions use one encoding)\n"},
      {fmt::format("forward '{}' --tokens 1,300 --json -", kTiny.string()),
       "wsbench: error (format): profile 'hf:hf-llama-tiny': token id 300 is outside the vocabulary [0, 256)\n"},
      {fmt::format("forward '{}' --tokens 1,a --json -", kTiny.string()),
       "wsbench: error (format): --tokens: item 2 'a' is not a token id (a comma-separated list of integers, e.g. "
       "1,17,42)\n"},
      {fmt::format("forward '{}' --tokens 1 --json -", type.string()),
       fmt::format("{}/config.json: field 'model_type'", type.string())},
      // Usage errors the argument parser finds are bad input too: exit 2, not the parser's own codes.
      {fmt::format("forward '{}' --tokens 1", kTiny.string()), "--json is required\n"},
      {fmt::format("publish --from-checkpoints '{}' '{}' --store '{}' --bogus", kTiny.string(), kStep1.string(), store),
       "The following argument was not expected: --bogus\n"},
  };
  for (const auto& [args, expected] : cases) {
    SCOPED_TRACE(args);
    const Outcome o = wsbench(args, dir.path());
    EXPECT_EQ(o.status, 2) << o.err;
    EXPECT_NE(o.err.find(expected), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(dir / "store" / "updates" / "weight_v000000"));
  }
}

TEST(CheckpointCommands, ForwardWritesOneRowPerPosition) {
  test::TempDir dir;
  const Outcome o = wsbench(fmt::format("forward '{}' --tokens 1,17,42 --tp 2 --json -", kTiny.string()), dir.path());
  ASSERT_EQ(o.status, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["logits"].size(), 3u);
  for (const auto& row : j["logits"]) EXPECT_EQ(row.size(), 256u);
  EXPECT_EQ(j["tokens"], nlohmann::json::array({1, 17, 42}));
  EXPECT_EQ(j["tp"], 2);
}

TEST(CheckpointCommands, TheCheckpointsMatrixPassesEveryCheck) {
  test::TempDir dir;
  const Outcome o = wsbench(fmt::format("run '{}' --quiet --out '{}'", (kSource / "matrices" / "checkpoints.json").string(),
                                        (dir / "out").string()),
                            dir.path());
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  const nlohmann::json results = nlohmann::json::parse(test::read_bytes(dir / "out" / "results.json"));
  std::vector<std::string> ids;
  for (const auto& cell : results["cells"]) {
    ids.push_back(cell["id"]);
    EXPECT_EQ(cell["status"], "pass") << cell["reason"];
    for (const auto& trial : cell["trials"]) {
      for (const auto& check : trial["checks"]) EXPECT_TRUE(check["pass"].get<bool>()) << check.dump();
    }
  }
  // Every family: the tiny Llama on its own weights, each real AdamW pair, gpt_oss MXFP4 and Kimi NVFP4; every mode.
  std::vector<std::string> expected;
  for (const char* model :
       {"hf-llama-tiny", "hf-llama-tiny..hf-llama-tiny-step1", "hf-glm4_moe-tiny..hf-glm4_moe-tiny-step1",
        "hf-glm4_moe-tiny-fp8..hf-glm4_moe-tiny-fp8-step1", "hf-deepseek_v3-tiny..hf-deepseek_v3-tiny-step1",
        "hf-gpt_oss-tiny..hf-gpt_oss-tiny-step1", "hf-gpt_oss-tiny-mxfp4", "hf-kimi-tiny-nvfp4"}) {
    for (const char* mode : {"disk", "cpu", "refit+inproc"}) expected.push_back(fmt::format("hf:{}/{}/native/tp2", model, mode));
  }
  EXPECT_EQ(ids, expected);
  EXPECT_NE(test::read_bytes(dir / "out" / "report.md").find("## Publications"), std::string::npos);
}

}  // namespace
}  // namespace wsb
