// Checkpoint directories: the transformers-saved tiny Llama, the index parser/writer, and one malformed
// directory per cross-check (shard paths, symlinks, index <-> shard name sets).
#include <gtest/gtest.h>

#include "checkpoint_test_util.hpp"
#include "models/checkpoint/checkpoint.hpp"

namespace wsb {
namespace {

using test::expect_error;
using testutil::read_bytes;
using testutil::TempDir;
using testutil::write_bytes;

const std::filesystem::path kLlama = std::filesystem::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";

TEST(CheckpointReader, OpensTransformersTinyLlama) {
  CheckpointReader reader(kLlama);
  const auto names = reader.tensor_names();
  ASSERT_EQ(names.size(), 30u);  // embed, lm_head, final norm + 3 layers x 9
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "lm_head.weight");
  EXPECT_EQ(names.back(), "model.norm.weight");

  const std::map<std::string, Shape> per_layer{
      {"input_layernorm.weight", {64}},      {"post_attention_layernorm.weight", {64}},
      {"self_attn.q_proj.weight", {64, 64}}, {"self_attn.k_proj.weight", {32, 64}},
      {"self_attn.v_proj.weight", {32, 64}}, {"self_attn.o_proj.weight", {64, 64}},
      {"mlp.gate_proj.weight", {96, 64}},    {"mlp.up_proj.weight", {96, 64}},
      {"mlp.down_proj.weight", {64, 96}}};
  std::map<std::string, Shape> expected{
      {"model.embed_tokens.weight", {256, 64}}, {"lm_head.weight", {256, 64}}, {"model.norm.weight", {64}}};
  for (int layer = 0; layer < 3; ++layer) {
    for (const auto& [suffix, shape] : per_layer) expected["model.layers." + std::to_string(layer) + "." + suffix] = shape;
  }
  uint64_t total = 0;
  for (const auto& [name, shape] : expected) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(reader.contains(name));
    const SafetensorsEntry& entry = reader.entry(name);
    EXPECT_EQ(entry.dtype, DType::BF16);
    EXPECT_EQ(entry.shape, shape);
    EXPECT_EQ(reader.data(name).size(), shape_numel(shape) * 2);
    total += entry.bytes();
  }
  EXPECT_EQ(reader.index().total_size, 250752u);
  EXPECT_EQ(total, 250752u);
  EXPECT_EQ(reader.index().metadata.at("total_parameters"), "125376");

  const auto shards = reader.shards();
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0]->path().filename(), "model-00001-of-00002.safetensors");
  EXPECT_EQ(shards[1]->path().filename(), "model-00002-of-00002.safetensors");
  EXPECT_EQ(shards[0]->entries().size(), 16u);
  EXPECT_EQ(shards[1]->entries().size(), 14u);
  EXPECT_EQ(&reader.shard_of("model.layers.1.mlp.gate_proj.weight"), shards[0]);
  EXPECT_EQ(&reader.shard_of("model.layers.1.mlp.down_proj.weight"), shards[1]);

  // lm_head is the first tensor of shard 2, whose header is 1416 bytes: its bytes start at file offset 1424.
  const std::string raw = read_bytes(kLlama / "model-00002-of-00002.safetensors");
  const auto lm_head = reader.data("lm_head.weight");
  ASSERT_EQ(lm_head.size(), 32768u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(lm_head.data()), lm_head.size()), raw.substr(1424, 32768));

  expect_error([&] { reader.entry("model.layers.3.mlp.up_proj.weight"); }, ErrorKind::Missing,
               {kLlama.string(), "tensor 'model.layers.3.mlp.up_proj.weight'"});
  EXPECT_FALSE(reader.contains("model.layers.3.mlp.up_proj.weight"));
}

// --- small synthetic checkpoints ------------------------------------------------------------------------------

// A shard with U8 [2] tensors filled with their index, written by wsbench's writer.
void make_shard(const std::filesystem::path& path, const std::vector<std::string>& names) {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorData> tensors;
  for (size_t i = 0; i < names.size(); ++i) bytes.push_back({static_cast<uint8_t>(i), static_cast<uint8_t>(i)});
  for (size_t i = 0; i < names.size(); ++i) tensors.push_back({TensorSpec{names[i], DType::U8, {2}}, bytes[i]});
  write_safetensors(path, tensors);
}

void write_index(const std::filesystem::path& dir, const std::string& weight_map_json) {
  write_bytes(dir / kIndexFileName, R"({"metadata":{"total_size":4},"weight_map":)" + weight_map_json + "}");
}

TEST(CheckpointReader, TwoShardCheckpointWithSubdirectory) {
  TempDir dir;
  std::filesystem::create_directory(dir / "sub");
  make_shard(dir / "s1.safetensors", {"a", "b"});
  make_shard(dir / "sub/s2.safetensors", {"c"});
  write_index(dir.path(), R"({"a":"s1.safetensors","b":"s1.safetensors","c":"sub/s2.safetensors"})");
  CheckpointReader reader(dir.path());
  EXPECT_EQ(reader.tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(reader.shard_of("c").path(), dir / "sub/s2.safetensors");
  const auto b = reader.data("b");
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), (std::vector<uint8_t>{1, 1}));
}

TEST(CheckpointReader, SingleFileCheckpointSynthesizesIndex) {
  TempDir dir;
  make_shard(dir / "model.safetensors", {"y", "x"});
  CheckpointReader reader(dir.path());
  EXPECT_EQ(reader.tensor_names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(reader.index().total_size, 4u);
  EXPECT_EQ(reader.index().weight_map,
            (std::map<std::string, std::string>{{"x", "model.safetensors"}, {"y", "model.safetensors"}}));
  EXPECT_EQ(reader.data("x")[0], 1);
}

TEST(CheckpointReader, EmptyDirectoryAndMissingDirectory) {
  TempDir dir;
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Missing,
               {dir.path().string(), "model.safetensors.index.json", "model.safetensors"});
  expect_error([&] { CheckpointReader r(dir / "nope"); }, ErrorKind::Missing, {(dir / "nope").string()});
}

TEST(CheckpointReader, ShardWithDotDotRejected) {
  TempDir dir;
  std::filesystem::create_directory(dir / "ckpt");
  make_shard(dir / "s1.safetensors", {"a"});
  write_index(dir / "ckpt", R"({"a":"../s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir / "ckpt"); }, ErrorKind::Format,
               {(dir / "ckpt" / kIndexFileName).string(), "shard path '../s1.safetensors' contains '..'"});
}

TEST(CheckpointReader, AbsoluteShardPathRejected) {
  TempDir dir;
  make_shard(dir / "s1.safetensors", {"a"});
  write_index(dir.path(), R"({"a":")" + (dir / "s1.safetensors").string() + R"("})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Format,
               {kIndexFileName, "shard path '" + (dir / "s1.safetensors").string() + "' is absolute"});
}

TEST(CheckpointReader, SymlinkEscapingDirectoryRejected) {
  TempDir dir;
  std::filesystem::create_directory(dir / "ckpt");
  make_shard(dir / "outside.safetensors", {"a"});
  std::filesystem::create_symlink("../outside.safetensors", dir / "ckpt" / "s1.safetensors");
  write_index(dir / "ckpt", R"({"a":"s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir / "ckpt"); }, ErrorKind::Format,
               {kIndexFileName, "shard 's1.safetensors' resolves to", "outside the checkpoint directory"});
}

TEST(CheckpointReader, SymlinkedSubdirectoryEscapingRejected) {
  TempDir dir;
  std::filesystem::create_directory(dir / "ckpt");
  std::filesystem::create_directory(dir / "elsewhere");
  make_shard(dir / "elsewhere" / "s1.safetensors", {"a"});
  std::filesystem::create_directory_symlink(dir / "elsewhere", dir / "ckpt" / "sub");
  write_index(dir / "ckpt", R"({"a":"sub/s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir / "ckpt"); }, ErrorKind::Format,
               {"shard 'sub/s1.safetensors' resolves to", "outside the checkpoint directory"});
}

TEST(CheckpointReader, SymlinkInsideDirectoryAccepted) {
  TempDir dir;
  std::filesystem::create_directory(dir / "blobs");
  make_shard(dir / "blobs" / "real.safetensors", {"a"});
  std::filesystem::create_symlink("blobs/real.safetensors", dir / "s1.safetensors");
  write_index(dir.path(), R"({"a":"s1.safetensors"})");
  CheckpointReader reader(dir.path());
  EXPECT_TRUE(reader.contains("a"));
}

TEST(CheckpointReader, MissingShardFile) {
  TempDir dir;
  write_index(dir.path(), R"({"a":"s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Missing, {kIndexFileName, "shard 's1.safetensors'"});
}

TEST(CheckpointReader, IndexedTensorAbsentFromShard) {
  TempDir dir;
  make_shard(dir / "s1.safetensors", {"a"});
  write_index(dir.path(), R"({"a":"s1.safetensors","b":"s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Missing,
               {kIndexFileName, "tensor 'b' is indexed to shard 's1.safetensors' but absent from",
                (dir / "s1.safetensors").string()});
}

TEST(CheckpointReader, ShardTensorNotInIndex) {
  TempDir dir;
  make_shard(dir / "s1.safetensors", {"a", "extra"});
  write_index(dir.path(), R"({"a":"s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Format,
               {kIndexFileName, "tensor 'extra' is in shard", (dir / "s1.safetensors").string(), "not in the index"});
}

TEST(CheckpointReader, ShardTensorIndexedToAnotherShard) {
  TempDir dir;
  make_shard(dir / "s1.safetensors", {"a", "b"});
  make_shard(dir / "s2.safetensors", {"b"});
  write_index(dir.path(), R"({"a":"s1.safetensors","b":"s2.safetensors"})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Format,
               {"tensor 'b' is in shard", (dir / "s1.safetensors").string(), "maps it to shard 's2.safetensors'"});
}

TEST(CheckpointReader, TruncatedShardIsTruncated) {
  TempDir dir;
  make_shard(dir / "s1.safetensors", {"a", "b"});
  const std::string full = read_bytes(dir / "s1.safetensors");
  write_bytes(dir / "s1.safetensors", full.substr(0, full.size() - 1));
  write_index(dir.path(), R"({"a":"s1.safetensors","b":"s1.safetensors"})");
  expect_error([&] { CheckpointReader r(dir.path()); }, ErrorKind::Truncated,
               {(dir / "s1.safetensors").string(), "data end 4"});
}

// --- index file -------------------------------------------------------------------------------------------------

TEST(CheckpointIndex, ShardPathRules) {
  const std::filesystem::path index = "/ckpt/model.safetensors.index.json";
  EXPECT_NO_THROW(check_shard_path(index, "model-00001-of-00002.safetensors"));
  EXPECT_NO_THROW(check_shard_path(index, "sub/dir/s.safetensors"));
  EXPECT_NO_THROW(check_shard_path(index, "..a.safetensors"));  // a name that merely starts with dots
  expect_error([&] { check_shard_path(index, "a/../b"); }, ErrorKind::Format,
               {index.string(), "shard path 'a/../b' contains '..'"});
  expect_error([&] { check_shard_path(index, ".."); }, ErrorKind::Format, {"contains '..'"});
  expect_error([&] { check_shard_path(index, "/etc/passwd"); }, ErrorKind::Format, {"'/etc/passwd' is absolute"});
  expect_error([&] { check_shard_path(index, "a//b"); }, ErrorKind::Format, {"'a//b' has an empty component"});
  expect_error([&] { check_shard_path(index, "a/"); }, ErrorKind::Format, {"'a/' has an empty component"});
  expect_error([&] { check_shard_path(index, ""); }, ErrorKind::Format, {"shard path '' is empty"});
  expect_error([&] { check_shard_path(index, "./a"); }, ErrorKind::Format, {"'./a' contains '.'"});
}

TEST(CheckpointIndex, ReadsStringAndNumberMetadata) {
  TempDir dir;
  const auto path = dir / kIndexFileName;
  write_bytes(path, R"({"metadata":{"total_size":250752,"total_parameters":125376,"version":"000003",
                        "scale":0.5},"weight_map":{"b":"s2.safetensors","a":"s1.safetensors"}})");
  const CheckpointIndex index = read_checkpoint_index(path);
  EXPECT_EQ(index.total_size, 250752u);
  EXPECT_EQ(index.metadata, (std::map<std::string, std::string>{
                                {"scale", "0.5"}, {"total_parameters", "125376"}, {"version", "000003"}}));
  EXPECT_EQ(index.weight_map,
            (std::map<std::string, std::string>{{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}));
}

TEST(CheckpointIndex, MalformedIndexes) {
  TempDir dir;
  const auto path = dir / kIndexFileName;
  auto check = [&](const std::string& text, ErrorKind kind, std::initializer_list<std::string> parts) {
    write_bytes(path, text);
    expect_error([&] { read_checkpoint_index(path); }, kind, parts);
  };
  check(R"({"metadata":{"flag":true},"weight_map":{}})", ErrorKind::Format,
        {path.string(), "metadata 'flag' value is not a string or number"});
  check(R"({"metadata":{"nested":{}},"weight_map":{}})", ErrorKind::Format, {"metadata 'nested'"});
  check(R"({"metadata":{"total_size":-3},"weight_map":{}})", ErrorKind::Format, {"metadata 'total_size' -3"});
  check(R"({"metadata":{}})", ErrorKind::Format, {path.string(), "weight_map missing"});
  check(R"({"weight_map":[]})", ErrorKind::Format, {"weight_map is not a JSON object"});
  check(R"({"weight_map":{"a":1}})", ErrorKind::Format, {"weight_map tensor 'a' shard is not a string"});
  check(R"({"weight_map":{"a":"s.safetensors","a":"t.safetensors"}})", ErrorKind::Format,
        {path.string(), "duplicate key 'a' in 'weight_map'"});
  check(R"({"weight_map":{"a":"../s.safetensors"}})", ErrorKind::Format, {"shard path '../s.safetensors'"});
  check(R"({"weight_map":)", ErrorKind::Format, {path.string(), "invalid JSON"});
  // Regression (fuzzing; the index shares the header's strict JSON parser): an out-of-range number escaped as
  // nlohmann's out_of_range instead of Error(Format).
  write_bytes(path, R"({"metadata":{"total_parameters":-1e999},"weight_map":{}})");
  EXPECT_EQ(test::error_message([&] { read_checkpoint_index(path); }, ErrorKind::Format),
            path.string() + ": invalid JSON: [json.exception.out_of_range.406] number overflow parsing '-1e999'");
  expect_error([&] { read_checkpoint_index(dir / "absent.json"); }, ErrorKind::Missing, {"absent.json"});
}

TEST(CheckpointIndex, WriteIsSortedPrettyAndRoundTrips) {
  TempDir dir;
  const auto path = dir / kIndexFileName;
  CheckpointIndex index;
  index.metadata = {{"version", "000002"}, {"base_version", "000001"}};
  index.total_size = 1234;
  index.weight_map = {{"z", "s2.safetensors"}, {"a", "s1.safetensors"}};
  write_checkpoint_index(path, index);
  EXPECT_EQ(read_bytes(path), R"({
  "metadata": {
    "base_version": "000001",
    "total_size": 1234,
    "version": "000002"
  },
  "weight_map": {
    "a": "s1.safetensors",
    "z": "s2.safetensors"
  }
}
)");
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json.tmp"));
  const CheckpointIndex back = read_checkpoint_index(path);
  EXPECT_EQ(back.metadata, index.metadata);
  EXPECT_EQ(back.total_size, 1234u);
  EXPECT_EQ(back.weight_map, index.weight_map);

  index.weight_map["bad"] = "/abs.safetensors";
  expect_error([&] { write_checkpoint_index(path, index); }, ErrorKind::Format, {"'/abs.safetensors' is absolute"});
}

}  // namespace
}  // namespace wsb
