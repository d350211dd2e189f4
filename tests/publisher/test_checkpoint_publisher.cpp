// Publications from consecutive real checkpoints: FULL v0 is the first checkpoint byte for byte, each DELTA applied
// to its base gives the next checkpoint exactly (the transformers-made AdamW pair hf-llama-tiny -> -step1, and copies
// with known edits for exact counts), the automatic encoding keeps the smaller payloads, and mismatched checkpoints
// are refused naming the field or tensor before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "publisher/checkpoint_publisher.hpp"
#include "tests/support/checkpoint_copy.hpp"
#include "tests/support/file_bytes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

const fs::path kTiny = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";
const fs::path kStep1 = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny-step1";
/// BF16 elements of hf-llama-tiny: 250752 bytes of tensors.
constexpr uint64_t kTinyElements = 125376;

using test::error_message;

std::vector<uint8_t> bytes_of(const CheckpointReader& reader, const std::string& name) {
  const auto d = reader.data(name);
  return {d.begin(), d.end()};
}

/// The canonical bytes of every tensor at `version` of `store`: v0's, then each DELTA decoded and applied (the
/// publication format's rules, independent of the sync modes).
std::map<std::string, std::vector<uint8_t>> replay(const fs::path& store, uint32_t version) {
  std::map<std::string, std::vector<uint8_t>> out;
  Publication full(Store(store), 0);
  for (const auto& name : full.tensor_names()) {
    const auto d = full.payload(name);
    out[name].assign(d.begin(), d.end());
  }
  for (uint32_t v = 1; v <= version; ++v) {
    Publication delta(Store(store), v);
    EXPECT_EQ(delta.tensor_names().size(), out.size());
    for (auto& [name, bytes] : out) {
      DecodedDelta decoded = decode_delta(delta.manifest().encoding, delta.payload(name), bytes.size(), name);
      apply_delta_swap(decoded, bytes);
      EXPECT_EQ(xxh3_128_hex(bytes), delta.expected_checksum(name)) << "v" << v << " " << name;
    }
  }
  return out;
}

/// Elements (2-byte BF16 codes) that differ between two checkpoints, counted here without the publisher's code.
uint64_t differing_bf16(const fs::path& a, const fs::path& b) {
  CheckpointReader x(a), y(b);
  uint64_t n = 0;
  for (const auto& name : x.tensor_names()) {
    const auto p = x.data(name), q = y.data(name);
    for (size_t i = 0; i + 1 < p.size(); i += 2) n += std::memcmp(&p[i], &q[i], 2) != 0;
  }
  return n;
}

uint64_t shard_file_bytes(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") n += fs::file_size(e.path());
  }
  return n;
}

TEST(CheckpointPublisher, RealAdamWStepGivesTheSecondCheckpointExactly) {
  test::TempDir dir;
  CheckpointPublishOptions options;
  options.store = dir / "store";
  const auto stats = publish_from_checkpoints({kTiny, kStep1}, options);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(Store(options.store).latest(), 1u);

  // v0: the first checkpoint byte for byte, with its config.json.
  const Store store(options.store);
  EXPECT_EQ(test::read_bytes(store.update_dir(0) / "config.json"), test::read_bytes(kTiny / "config.json"));
  CheckpointReader tiny(kTiny), step1(kStep1);
  const auto v0 = replay(options.store, 0);
  ASSERT_EQ(v0.size(), tiny.tensor_names().size());
  for (const auto& [name, bytes] : v0) EXPECT_EQ(bytes, bytes_of(tiny, name)) << name;
  // v1 applied to v0: the second checkpoint, every checksum of its bytes.
  const auto v1 = replay(options.store, 1);
  for (const auto& [name, bytes] : v1) EXPECT_EQ(bytes, bytes_of(step1, name)) << name;
  const Publication delta(store, 1);
  EXPECT_EQ(delta.manifest().base_version, 0u);
  EXPECT_EQ(delta.manifest().encoding, DeltaEncoding::Xor);

  EXPECT_TRUE(stats[0].full);
  EXPECT_EQ(stats[0].changed_values, 0u);
  EXPECT_EQ(stats[0].changes, (std::map<std::string, ChangeCount>{{"BF16", {kTinyElements, 0}}}));
  EXPECT_EQ(stats[0].source, kTiny);
  EXPECT_EQ(stats[0].canonical_bytes, 2 * kTinyElements);
  EXPECT_EQ(stats[0].stored_bytes, shard_file_bytes(store.update_dir(0)));
  EXPECT_FALSE(stats[0].encoding.has_value());

  // The AdamW step moved 27.6% of the BF16 elements (tests/fixtures/README.md), counted independently here.
  const uint64_t changed = differing_bf16(kTiny, kStep1);
  EXPECT_EQ(changed, 34558u);
  EXPECT_FALSE(stats[1].full);
  EXPECT_EQ(stats[1].source, kStep1);
  EXPECT_EQ(stats[1].changed_values, changed);
  EXPECT_EQ(stats[1].changes, (std::map<std::string, ChangeCount>{{"BF16", {kTinyElements, changed}}}));
  EXPECT_DOUBLE_EQ(stats[1].density(), static_cast<double>(changed) / kTinyElements);
  EXPECT_EQ(stats[1].encoding, DeltaEncoding::Xor);
  EXPECT_EQ(stats[1].stored_bytes, shard_file_bytes(store.update_dir(1)));
  EXPECT_DOUBLE_EQ(stats[1].compression_ratio(), 2.0 * kTinyElements / static_cast<double>(stats[1].stored_bytes));
  uint64_t payloads = 0;
  for (const auto& name : delta.tensor_names()) payloads += delta.payload(name).size();
  EXPECT_EQ(stats[1].payload_bytes, (std::map<std::string, uint64_t>{{"xor", payloads}}));
  // Nothing but the two publications and `latest` is left in the store (the spill files are unnamed).
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(options.store / "updates")) entries.push_back(e.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"weight_v000000", "weight_v000001"}));
}

/// hf-llama-tiny and a copy with three BF16 elements moved in two tensors.
struct KnownEdit {
  test::TempDir dir;
  fs::path a = kTiny;
  fs::path b = dir / "b";
  KnownEdit() {
    test::copy_checkpoint(kTiny, b);
    test::flip_elements(b, "model.layers.0.self_attn.q_proj.weight", {5, 700});
    test::flip_elements(b, "model.norm.weight", {0});
  }
};

TEST(CheckpointPublisher, CountsExactlyTheElementsThatMoved) {
  KnownEdit pair;
  for (DeltaEncoding encoding : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    SCOPED_TRACE(std::string(delta_encoding_name(encoding)));
    CheckpointPublishOptions options;
    options.store = pair.dir / ("store-" + std::string(delta_encoding_name(encoding)));
    options.encoding = encoding;
    const auto stats = publish_from_checkpoints({pair.a, pair.b}, options);
    EXPECT_EQ(stats[1].changed_values, 3u);
    EXPECT_EQ(stats[1].changes, (std::map<std::string, ChangeCount>{{"BF16", {kTinyElements, 3}}}));
    EXPECT_EQ(stats[1].encoding, encoding);
    EXPECT_EQ(Publication(Store(options.store), 1).manifest().encoding, encoding);
    CheckpointReader b(pair.b);
    for (const auto& [name, bytes] : replay(options.store, 1)) EXPECT_EQ(bytes, bytes_of(b, name)) << name;
  }
}

TEST(CheckpointPublisher, AutomaticEncodingKeepsTheSmallerPayloadsOfEachVersion) {
  // v1: the AdamW step (27.6% of the elements: xor's mask compresses better); v2: three elements (overwrite's three
  // positions are smaller than a mask of the whole checkpoint).
  test::TempDir dir;
  const fs::path c = dir / "c";
  test::copy_checkpoint(kStep1, c);
  test::flip_elements(c, "model.layers.0.self_attn.q_proj.weight", {5, 700});
  test::flip_elements(c, "model.norm.weight", {0});
  CheckpointPublishOptions options;
  options.store = dir / "store";
  options.encoding = std::nullopt;
  const auto stats = publish_from_checkpoints({kTiny, kStep1, c}, options);
  ASSERT_EQ(stats.size(), 3u);
  CheckpointReader r0(kTiny), r1(kStep1), r2(c);
  const std::vector<const CheckpointReader*> readers{&r0, &r1, &r2};
  for (uint32_t v = 1; v <= 2; ++v) {
    std::map<std::string, uint64_t> sizes;
    for (const auto& name : r0.tensor_names()) {
      for (DeltaEncoding e : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
        sizes[std::string(delta_encoding_name(e))] +=
            encode_delta(e, readers[v - 1]->data(name), readers[v]->data(name), 1).size();
      }
    }
    EXPECT_EQ(stats[v].payload_bytes, sizes) << v;
    const DeltaEncoding smaller = sizes["overwrite"] < sizes["xor"] ? DeltaEncoding::Overwrite : DeltaEncoding::Xor;
    EXPECT_EQ(stats[v].encoding, smaller) << v;
    EXPECT_EQ(Publication(Store(options.store), v).manifest().encoding, smaller) << v;
  }
  EXPECT_EQ(stats[1].encoding, DeltaEncoding::Xor);
  EXPECT_EQ(stats[2].encoding, DeltaEncoding::Overwrite);
  EXPECT_EQ(Publication(Store(options.store), 2).manifest().base_version, 1u);
  for (const auto& [name, bytes] : replay(options.store, 2)) EXPECT_EQ(bytes, bytes_of(r2, name)) << name;
}

TEST(CheckpointPublisher, SmallShardsAndThreadsPublishTheSameBytes) {
  KnownEdit pair;
  CheckpointPublishOptions one;
  one.store = pair.dir / "one";
  publish_from_checkpoints({kTiny, kStep1}, one);
  CheckpointPublishOptions many = one;
  many.store = pair.dir / "many";
  many.threads = 3;
  many.max_shard_bytes = 20000;  // several shards per publication
  publish_from_checkpoints({kTiny, kStep1}, many);
  EXPECT_GT(read_checkpoint_index(Store(many.store).update_dir(1) / kIndexFileName).weight_map.size(), 0u);
  std::set<std::string> shards;
  for (const auto& [t, shard] : read_checkpoint_index(Store(many.store).update_dir(1) / kIndexFileName).weight_map) {
    shards.insert(shard);
  }
  EXPECT_GT(shards.size(), 2u);
  for (uint32_t v = 0; v <= 1; ++v) {
    Publication x(Store(one.store), v), y(Store(many.store), v);
    ASSERT_EQ(x.tensor_names(), y.tensor_names());
    for (const auto& name : x.tensor_names()) {
      const auto p = x.payload(name), q = y.payload(name);
      EXPECT_TRUE(std::equal(p.begin(), p.end(), q.begin(), q.end())) << name;
      EXPECT_EQ(x.expected_checksum(name), y.expected_checksum(name));
    }
  }
}

/// Publishing `dirs` fails with `kind`; returns the message, and checks that the store stayed empty.
std::string refused(const std::vector<fs::path>& dirs, const fs::path& store, ErrorKind kind) {
  CheckpointPublishOptions options;
  options.store = store;
  const std::string message = error_message([&] { publish_from_checkpoints(dirs, options); }, kind);
  EXPECT_FALSE(fs::exists(store / "updates" / "weight_v000000")) << message;
  EXPECT_FALSE(fs::exists(store / "latest")) << message;
  return message;
}

TEST(CheckpointPublisher, RefusesCheckpointsOfAnotherArchitectureNamingTheField) {
  test::TempDir dir;
  const fs::path b = dir / "b";
  test::copy_checkpoint(kStep1, b);
  test::edit_config(b, [](nlohmann::json& c) { c["num_hidden_layers"] = 2; });
  // Each directory is first checked against its own config.json: the third layer's tensors are then extra.
  EXPECT_EQ(refused({kTiny, b}, dir / "s1", ErrorKind::Mismatch),
            fmt::format("{0}/model.safetensors: tensor 'model.layers.2.input_layernorm.weight' (BF16 [64]) is not "
                        "part of the llama model {0}/config.json describes",
                        b.string()));
  // A field that changes no tensor passes that check and is caught comparing the two configs.
  test::edit_config(b, [](nlohmann::json& c) {
    c["num_hidden_layers"] = 3;
    c["rope_parameters"]["rope_theta"] = 10000.0;
  });
  EXPECT_EQ(refused({kTiny, b}, dir / "s2", ErrorKind::Mismatch),
            fmt::format("{}/config.json: field 'rope_parameters.rope_theta' is 10000.0 but {}/config.json has "
                        "500000.0: consecutive checkpoints must be one architecture",
                        b.string(), kTiny.string()));
  // Fields of the saving run are not the architecture.
  test::edit_config(b, [](nlohmann::json& c) {
    c["rope_parameters"]["rope_theta"] = 500000.0;
    c["transformers_version"] = "4.57.0";
    c["_name_or_path"] = "/ckpt/step-1";
    c.erase("dtype");
    c["torch_dtype"] = "bfloat16";
  });
  CheckpointPublishOptions options;
  options.store = dir / "s3";
  EXPECT_EQ(publish_from_checkpoints({kTiny, b}, options).size(), 2u);
}

TEST(CheckpointPublisher, RefusesAnUnsupportedModelTypeNamingTheField) {
  test::TempDir dir;
  const fs::path b = dir / "b";
  test::copy_checkpoint(kStep1, b);
  test::edit_config(b, [](nlohmann::json& c) { c["model_type"] = "mamba"; });
  const std::string message = refused({kTiny, b}, dir / "s", ErrorKind::Format);
  EXPECT_NE(message.find((b / "config.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("'model_type'"), std::string::npos) << message;
}

TEST(CheckpointPublisher, RefusesMismatchedTensorsNamingTheTensor) {
  test::TempDir dir;
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const fs::path dtype = dir / "dtype";
  test::copy_checkpoint(kStep1, dtype);
  test::edit_checkpoint_tensor(dtype, q, [](test::EditableTensor& t) { t.spec.dtype = DType::F16; });
  EXPECT_EQ(refused({kTiny, dtype}, dir / "s1", ErrorKind::Mismatch),
            fmt::format("{0}/model.safetensors: tensor '{1}': expected BF16 [64, 64] from {0}/config.json, found F16 "
                        "[64, 64]",
                        dtype.string(), q));
  const fs::path shape = dir / "shape";
  test::copy_checkpoint(kStep1, shape);
  test::edit_checkpoint_tensor(shape, q, [](test::EditableTensor& t) { t.spec.shape = {32, 128}; });
  EXPECT_EQ(refused({kTiny, shape}, dir / "s2", ErrorKind::Mismatch),
            fmt::format("{0}/model.safetensors: tensor '{1}': expected BF16 [64, 64] from {0}/config.json, found "
                        "BF16 [32, 128]",
                        shape.string(), q));
  const fs::path extra = dir / "extra";
  test::copy_checkpoint(kStep1, extra);
  test::rewrite_shard(extra / "model.safetensors",
                      [](std::vector<test::EditableTensor>& tensors, std::map<std::string, std::string>&) {
                        tensors.push_back({TensorSpec{"model.rotary_emb.inv_freq", DType::F32, {8}},
                                           std::vector<uint8_t>(32, 0)});
                      });
  const std::string not_part = fmt::format(
      "{0}/model.safetensors: tensor 'model.rotary_emb.inv_freq' (F32 [8]) is not part of the llama model "
      "{0}/config.json describes",
      extra.string());
  EXPECT_EQ(refused({kTiny, extra}, dir / "s3", ErrorKind::Mismatch), not_part);
  // First or second in the list: the directory holding the tensor is the one named.
  EXPECT_EQ(refused({extra, kTiny}, dir / "s4", ErrorKind::Mismatch), not_part);
}

TEST(CheckpointPublisher, RefusesAMissingShardAndAnIndexNamingAnAbsentTensor) {
  test::TempDir dir;
  const fs::path gone = dir / "gone";
  test::copy_checkpoint(kTiny, gone);
  fs::remove(gone / "model-00002-of-00002.safetensors");
  const std::string missing = refused({kStep1, gone}, dir / "s1", ErrorKind::Missing);
  EXPECT_NE(missing.find("model-00002-of-00002.safetensors"), std::string::npos) << missing;
  const fs::path ghost = dir / "ghost";
  test::copy_checkpoint(kTiny, ghost);
  CheckpointIndex index = read_checkpoint_index(ghost / kIndexFileName);
  index.weight_map["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
  write_checkpoint_index(ghost / kIndexFileName, index);
  const std::string absent = refused({kStep1, ghost}, dir / "s2", ErrorKind::Missing);
  EXPECT_NE(absent.find("model.layers.9.mlp.up_proj.weight"), std::string::npos) << absent;
}

TEST(CheckpointPublisher, RefusesAPublishedVersionAndWritesNothing) {
  test::TempDir dir;
  CheckpointPublishOptions options;
  options.store = dir / "store";
  publish_from_checkpoints({kTiny, kStep1}, options);
  const auto before = test::read_bytes(Store(options.store).update_dir(1) / kIndexFileName);
  EXPECT_EQ(error_message([&] { publish_from_checkpoints({kTiny, kStep1}, options); }, ErrorKind::Lineage),
            fmt::format("version 000000 is already published in {} ({} exists)", options.store.string(),
                        Store(options.store).update_dir(0).string()));
  EXPECT_EQ(test::read_bytes(Store(options.store).update_dir(1) / kIndexFileName), before);
  EXPECT_EQ(error_message([&] { publish_from_checkpoints({}, options); }, ErrorKind::Format),
            "no checkpoint directory given");
}

}  // namespace
}  // namespace wsb
