// Publication validation (docs/design.md "Publication format") on publications written by hand with SafetensorsWriter
// and write_checkpoint_index, the update planner, and PublicationWriter.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>

#include <fmt/format.h>

#include "models/checkpoint/checkpoint.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/publication.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using test::TempDir;
using test::expect_error;

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;



struct HandTensor {
  TensorSpec spec;
  Bytes bytes;
};

struct HandShard {
  std::string file;
  std::vector<HandTensor> tensors;
  std::map<std::string, std::string> checksums;  // the shard's __metadata__
};

/// A publication exactly as it will be written: shards, index metadata and weight_map, each editable by a test.
struct HandPublication {
  std::map<std::string, std::string> metadata;
  std::vector<HandShard> shards;
  std::map<std::string, std::string> weight_map;

  void write(const fs::path& dir) const {
    fs::create_directories(dir);
    CheckpointIndex index;
    index.metadata = metadata;
    index.weight_map = weight_map;
    for (const HandShard& shard : shards) {
      std::vector<TensorData> data;
      for (const HandTensor& t : shard.tensors) {
        data.push_back({t.spec, t.bytes});
        index.total_size += t.bytes.size();
      }
      write_safetensors(dir / shard.file, data, shard.checksums);
    }
    write_checkpoint_index(dir / kIndexFileName, index);
  }
};

/// Canonical bytes of the two hand tensors at version v (8 bytes each, byte v differs per version).
Bytes canonical(const std::string& name, uint32_t v) {
  Bytes b(8);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(name[0] + i);
  for (uint32_t k = 1; k <= v && k <= 8; ++k) b[k - 1] ^= 0x40;
  return b;
}

HandTensor payload_tensor(const std::string& name, const Bytes& payload) {
  return {{name, DType::U8, {static_cast<int64_t>(payload.size())}}, payload};
}

/// A valid DELTA: version v (base v - 1), tensors a.weight (shard 1) and b.weight (shard 2).
HandPublication good_delta(uint32_t v, DeltaEncoding encoding = DeltaEncoding::Overwrite) {
  HandPublication p;
  p.metadata = {{"version", fmt::format("{:06d}", v)},
                {"base_version", fmt::format("{:06d}", v - 1)},
                {"delta_encoding", std::string(delta_encoding_name(encoding))},
                {"compression_format", "zstd"},
                {"checksum_format", "xxh3-128"}};
  int index = 1;
  for (std::string name : {"a.weight", "b.weight"}) {
    Bytes payload = encode_delta(encoding, canonical(name, v - 1), canonical(name, v), 1);
    std::string file = fmt::format("model-{:05d}-of-00002.safetensors", index++);
    p.shards.push_back({file, {payload_tensor(name, payload)}, {{name, xxh3_128_hex(canonical(name, v))}}});
    p.weight_map[name] = file;
  }
  return p;
}

/// A valid FULL version 0 with both tensors as BF16 [2, 2] in one shard.
HandPublication good_full() {
  HandPublication p;
  p.metadata = {{"version", "000000"}, {"checksum_format", "xxh3-128"}};
  HandShard shard{"model-00001-of-00001.safetensors", {}, {}};
  for (std::string name : {"a.weight", "b.weight"}) {
    shard.tensors.push_back({{name, DType::BF16, {2, 2}}, canonical(name, 0)});
    shard.checksums[name] = xxh3_128_hex(canonical(name, 0));
    p.weight_map[name] = shard.file;
  }
  p.shards.push_back(shard);
  return p;
}

TEST(Publication, OpensValidDelta) {
  TempDir tmp;
  Store store(tmp.path());
  good_delta(2).write(store.update_dir(2));
  Publication pub(store, 2);
  EXPECT_EQ(pub.version(), 2u);
  EXPECT_FALSE(pub.is_full());
  EXPECT_EQ(pub.manifest().kind, PublicationKind::Delta);
  EXPECT_EQ(pub.manifest().base_version, 1u);
  EXPECT_EQ(pub.manifest().encoding, DeltaEncoding::Overwrite);
  EXPECT_EQ(pub.manifest().compression_format, "zstd");
  EXPECT_EQ(pub.manifest().checksum_format, "xxh3-128");
  EXPECT_EQ(pub.dir(), store.update_dir(2));
  EXPECT_EQ(pub.tensor_names(), (std::vector<std::string>{"a.weight", "b.weight"}));
  EXPECT_TRUE(pub.contains("b.weight"));
  EXPECT_FALSE(pub.contains("c.weight"));
  EXPECT_EQ(pub.expected_checksum("a.weight"), xxh3_128_hex(canonical("a.weight", 2)));
  // The payload applied to version 1 gives version 2.
  auto payload = pub.payload("b.weight");
  DecodedDelta delta = decode_delta(DeltaEncoding::Overwrite, payload, 8, "b.weight");
  Bytes data = canonical("b.weight", 1);
  apply_delta_swap(delta, data);
  EXPECT_EQ(data, canonical("b.weight", 2));
  EXPECT_EQ(pub.entry("a.weight").dtype, DType::U8);
  expect_error([&] { pub.payload("c.weight"); }, ErrorKind::Missing, {"000002", "'c.weight'"});
  expect_error([&] { pub.expected_checksum("c.weight"); }, ErrorKind::Missing, {"000002", "'c.weight'"});
}

TEST(Publication, OpensValidFull) {
  TempDir tmp;
  Store store(tmp.path());
  good_full().write(store.update_dir(0));
  Publication pub(store, 0);
  EXPECT_TRUE(pub.is_full());
  EXPECT_EQ(pub.manifest().base_version, std::nullopt);
  EXPECT_EQ(pub.entry("a.weight").dtype, DType::BF16);
  EXPECT_EQ(pub.entry("a.weight").shape, (Shape{2, 2}));
  auto bytes = pub.payload("b.weight");
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), canonical("b.weight", 0));
  EXPECT_EQ(pub.expected_checksum("b.weight"), xxh3_128_hex(canonical("b.weight", 0)));
}

TEST(Publication, MissingVersion) {
  TempDir tmp;
  Store store(tmp.path() / "store");
  expect_error([&] { Publication(store, 7); }, ErrorKind::Missing,
               {"version 000007 not published in " + (tmp.path() / "store").string()});
}

TEST(Publication, HeaderNameNotInChecksumMap) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  p.shards[1].checksums.clear();
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Mismatch,
               {"publication 000001 shard 'model-00002-of-00002.safetensors'",
                "tensor 'b.weight' is in the shard header and the index weight_map but missing from the checksum map "
                "(__metadata__)"});
}

TEST(Publication, IndexEntryMissing) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  // Both tensors in shard 1, only one of them indexed.
  p.shards[0].tensors.push_back(p.shards[1].tensors[0]);
  p.shards[0].checksums.insert(*p.shards[1].checksums.begin());
  p.shards.pop_back();
  p.weight_map.erase("b.weight");
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Mismatch,
               {"'model-00001-of-00002.safetensors'",
                "tensor 'b.weight' is in the shard header and the checksum map (__metadata__) but missing from the "
                "index weight_map"});
}

TEST(Publication, ChecksumForAbsentTensor) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  p.shards[0].checksums["c.weight"] = std::string(32, 'a');
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Mismatch,
               {"tensor 'c.weight' is in the checksum map (__metadata__) but missing from the shard header and the "
                "index weight_map"});
}

TEST(Publication, IndexedToTheWrongShard) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  p.weight_map["b.weight"] = "model-00001-of-00002.safetensors";  // really in shard 2
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Mismatch,
               {"'model-00001-of-00002.safetensors'",
                "tensor 'b.weight' is in the index weight_map but missing from the shard header and the checksum "
                "map"});
}

TEST(Publication, ChecksumOfAnotherAlgorithm) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  p.shards[0].checksums["a.weight"] = std::string(64, 'e');  // a sha256-sized hex digest
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Format,
               {"checksum of tensor 'a.weight'", "64 hex chars: a checksum of another algorithm"});
}

TEST(Publication, ChecksumNotLowercaseHex) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  std::string upper = xxh3_128_hex(canonical("a.weight", 1));
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  upper[0] = 'G';
  p.shards[0].checksums["a.weight"] = upper;
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Format,
               {"checksum of tensor 'a.weight'", "is not 32 lowercase hex chars"});
}

TEST(Publication, MetadataVersionDiffersFromDirectory) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(3);
  p.write(store.update_dir(2));
  expect_error([&] { Publication(store, 2); }, ErrorKind::Lineage,
               {"weight_v000002", "metadata 'version' 000003 differs from the directory's version 000002"});
}

TEST(Publication, MetadataFieldErrors) {
  struct Case {
    std::string key;
    std::optional<std::string> value;  // nullopt: erase the field
    std::string message;
  };
  std::vector<Case> cases = {
      {"checksum_format", "sha256", "metadata 'checksum_format' 'sha256' is unknown (known: xxh3-128, xxh3-128-ranges)"},
      {"compression_format", "lz4", "metadata 'compression_format' 'lz4' is unknown (known: zstd, zstd-frames)"},
      {"compression_format", std::nullopt, "metadata 'compression_format' missing"},
      {"base_version", std::nullopt, "metadata 'base_version' missing"},
      {"base_version", "1", "metadata 'base_version': expected a 6-digit version, got '1'"},
      {"delta_encoding", "add", "metadata 'delta_encoding' 'add' is not xor or overwrite"},
      {"version", std::nullopt, "metadata 'version' missing"},
      {"checksum_range_bytes", "1048576",
       "metadata 'checksum_range_bytes' is set but checksum_format is xxh3-128 (one digest per tensor)"},
  };
  for (const Case& c : cases) {
    TempDir tmp;
    Store store(tmp.path());
    HandPublication p = good_delta(1);
    if (c.value) {
      p.metadata[c.key] = *c.value;
    } else {
      p.metadata.erase(c.key);
    }
    p.write(store.update_dir(1));
    SCOPED_TRACE(c.message);
    expect_error([&] { Publication(store, 1); }, ErrorKind::Format, {kIndexFileName, c.message});
  }
}

TEST(Publication, RangedChecksumFieldErrors) {
  struct Case {
    std::optional<std::string> range_bytes;  // nullopt: absent
    std::string checksum;                    // of a.weight
    std::string message;
  };
  const std::string good(64, 'a');
  const std::vector<Case> cases = {
      {std::nullopt, good, "metadata 'checksum_range_bytes' missing (required by xxh3-128-ranges)"},
      {"4096", good, "metadata 'checksum_range_bytes' '4096' is not a positive decimal multiple of 1 MiB (1048576)"},
      {"0", good, "metadata 'checksum_range_bytes' '0' is not a positive decimal multiple of 1 MiB (1048576)"},
      {"1MiB", good, "metadata 'checksum_range_bytes' '1MiB' is not a positive decimal multiple of 1 MiB (1048576)"},
      {"1048576", std::string(40, 'a'),
       "checksum of tensor 'a.weight' 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' is not one or more xxh3-128 digests (32 "
       "lowercase hex chars each; checksum_format is xxh3-128-ranges)"},
  };
  for (const Case& c : cases) {
    TempDir tmp;
    Store store(tmp.path());
    HandPublication p = good_delta(1);
    p.metadata["checksum_format"] = "xxh3-128-ranges";
    if (c.range_bytes) p.metadata["checksum_range_bytes"] = *c.range_bytes;
    p.shards[0].checksums["a.weight"] = c.checksum;
    p.write(store.update_dir(1));
    SCOPED_TRACE(c.message);
    expect_error([&] { Publication(store, 1); }, ErrorKind::Format, {c.message});
  }
}

TEST(Publication, RangedChecksumsRoundTripThroughTheWriter) {
  TempDir tmp;
  Store store(tmp.path());
  constexpr uint64_t kMiB = 1 << 20;
  // A streamed shard whose checksums the writer computes: one digest per MiB, the placeholder patched in place.
  PublicationManifest full;
  full.checksum_format = "xxh3-128-ranges";
  full.checksum_range_bytes = kMiB;
  const TensorSpec big{"big.weight", DType::U8, {static_cast<int64_t>(2 * kMiB + 17)}};
  const TensorSpec small{"small.weight", DType::U8, {5}};
  Bytes big_bytes(big.bytes()), small_bytes{1, 2, 3, 4, 5};
  for (size_t i = 0; i < big_bytes.size(); ++i) big_bytes[i] = static_cast<uint8_t>(i * 7);
  {
    PublicationWriter writer(store.update_dir(0), full, 64 * kMiB, true, false);
    writer.begin_shard({big, small});
    writer.append(std::span<const uint8_t>(big_bytes).first(kMiB + 3));
    writer.append(std::span<const uint8_t>(big_bytes).subspan(kMiB + 3));
    writer.append(small_bytes);
    writer.end_shard();
    writer.commit();
  }
  const Publication pub(store, 0);
  EXPECT_EQ(pub.manifest().checksum_format, "xxh3-128-ranges");
  EXPECT_EQ(pub.manifest().checksum_range_bytes, kMiB);
  EXPECT_EQ(pub.expected_checksum("big.weight"), tensor_checksum_text(big_bytes, kMiB));
  EXPECT_EQ(pub.expected_checksum("big.weight").size(), 3u * 32);
  EXPECT_EQ(pub.expected_checksum("small.weight"), xxh3_128_hex(small_bytes));
  EXPECT_EQ(pub.expected_checksum("big.weight", big.bytes()).range_count(), 3u);
  const CheckpointIndex index = read_checkpoint_index(store.update_dir(0) / kIndexFileName);
  EXPECT_EQ(index.metadata.at("checksum_range_bytes"), "1048576");
  // A DELTA writer refuses a given checksum that is not whole digests.
  PublicationWriter delta(store.update_dir(1), delta_manifest(1, DeltaEncoding::Xor, PayloadFraming::OneFrame, kMiB),
                          kMiB, true, false);
  expect_error([&] { delta.begin_shard({TensorSpec{"big.weight", DType::U8, {3}}}, {std::string(48, 'a')}); },
               ErrorKind::Format,
               {"tensor 'big.weight': checksum '" + std::string(48, 'a') +
                "' is not one or more xxh3-128 digests of 32 lowercase hex characters (xxh3-128-ranges)"});
}

TEST(Publication, DeltaTensorMustBeU8Payload) {
  TempDir tmp;
  Store store(tmp.path());
  HandPublication p = good_delta(1);
  p.shards[0].tensors[0] = {{"a.weight", DType::BF16, {2, 2}}, canonical("a.weight", 1)};
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Format,
               {"delta tensor 'a.weight' is BF16 [2, 2], expected a 1-D U8 payload"});
  p.shards[0].tensors[0] = {{"a.weight", DType::U8, {2, 4}}, canonical("a.weight", 1)};
  fs::remove_all(store.update_dir(1));
  p.write(store.update_dir(1));
  expect_error([&] { Publication(store, 1); }, ErrorKind::Format, {"delta tensor 'a.weight' is U8 [2, 4]"});
}

TEST(Publication, TruncatedShardIsRetryable) {
  TempDir tmp;
  Store store(tmp.path());
  good_delta(1).write(store.update_dir(1));
  fs::path shard = store.update_dir(1) / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 1);
  try {
    Publication pub(store, 1);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Truncated) << e.what();
    EXPECT_TRUE(e.retryable());
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Publication, MissingShardFile) {
  TempDir tmp;
  Store store(tmp.path());
  good_delta(1).write(store.update_dir(1));
  fs::remove(store.update_dir(1) / "model-00001-of-00002.safetensors");
  expect_error([&] { Publication(store, 1); }, ErrorKind::Missing, {"model-00001-of-00002.safetensors"});
}

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr), 1);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_full().write(store.update_dir(0));
    for (uint32_t v = 1; v <= 3; ++v) good_delta(v).write(store.update_dir(v));
  }
  TempDir tmp;
  Store store{tmp.path()};
};

TEST_F(PlanTest, PlansAndHashesTheLineage) {
  UpdatePlan plan = plan_update(store, 0, 3);
  EXPECT_EQ(plan.from, 0u);
  EXPECT_EQ(plan.to, 3u);
  ASSERT_EQ(plan.steps.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(plan.steps[i]->version(), i + 1);
  std::string lines;
  for (uint32_t v = 1; v <= 3; ++v) {
    for (std::string name : {"a.weight", "b.weight"}) {
      lines += fmt::format("{:06d}\t{}\t{}\n", v, name, xxh3_128_hex(canonical(name, v)));
    }
  }
  EXPECT_EQ(plan.plan_hash, sha256_hex(lines));
  EXPECT_EQ(plan.plan_hash.size(), 64u);

  UpdatePlan tail = plan_update(store, 1, 3);
  ASSERT_EQ(tail.steps.size(), 2u);
  EXPECT_EQ(tail.steps[0]->version(), 2u);
  EXPECT_NE(tail.plan_hash, plan.plan_hash);
  // Catching up 1 -> 3 folds both deltas per tensor.
  for (std::string name : {"a.weight", "b.weight"}) {
    Bytes data = canonical(name, 1);
    for (const auto& step : tail.steps) {
      DecodedDelta d = decode_delta(step->manifest().encoding, step->payload(name), 8, name);
      apply_delta_swap(d, data);
    }
    EXPECT_EQ(xxh3_128_hex(data), tail.steps.back()->expected_checksum(name));
  }
}

TEST_F(PlanTest, Gap) {
  fs::remove_all(store.update_dir(2));
  expect_error([&] { plan_update(store, 0, 3); }, ErrorKind::Lineage,
               {"update plan 000000 -> 000003", "gap, version 000002 is not published"});
}

TEST_F(PlanTest, BaseMismatch) {
  fs::remove_all(store.update_dir(3));
  HandPublication p = good_delta(3);
  p.metadata["base_version"] = "000001";
  p.write(store.update_dir(3));
  expect_error([&] { plan_update(store, 1, 3); }, ErrorKind::Lineage,
               {"version 000003 has base_version 000001, expected 000002"});
}

TEST_F(PlanTest, MissingTargetAndBackwards) {
  expect_error([&] { plan_update(store, 0, 7); }, ErrorKind::Missing,
               {"version 000007 not published in " + tmp.path().string()});
  expect_error([&] { plan_update(store, 3, 3); }, ErrorKind::Lineage, {"target 000003 is not after 000003"});
  expect_error([&] { plan_update(store, 3, 1); }, ErrorKind::Lineage, {"target 000001 is not after 000003"});
}

TEST_F(PlanTest, FullStepRejected) {
  fs::remove_all(store.update_dir(2));
  HandPublication p = good_full();
  p.metadata["version"] = "000002";
  p.write(store.update_dir(2));
  expect_error([&] { plan_update(store, 1, 3); }, ErrorKind::Format, {"version 000002", "is FULL, not a DELTA"});
}

TEST(PublicationHelpers, NamesAndSplits) {
  EXPECT_EQ(shard_file_name(1, 4), "model-00001-of-00004.safetensors");
  EXPECT_EQ(shard_file_name(12, 12), "model-00012-of-00012.safetensors");
  std::vector<uint64_t> sizes{5, 5, 5, 20, 1};
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(split_shards(sizes, 10), (R{{0, 2}, {2, 3}, {3, 4}, {4, 5}}));
  EXPECT_EQ(split_shards(sizes, 1000), (R{{0, 5}}));
  EXPECT_EQ(split_shards(std::vector<uint64_t>{}, 10), R{});
  EXPECT_TRUE(is_xxh3_128_hex("0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(is_xxh3_128_hex("0123456789ABCDEF0123456789abcdef"));
  EXPECT_FALSE(is_xxh3_128_hex("0123456789abcdef0123456789abcde"));
  PublicationManifest m;
  m.version = 4;
  m.kind = PublicationKind::Delta;
  m.base_version = 3;
  m.encoding = DeltaEncoding::Xor;
  m.compression_format = "zstd";
  EXPECT_EQ(manifest_metadata(m), (std::map<std::string, std::string>{{"version", "000004"},
                                                                      {"base_version", "000003"},
                                                                      {"delta_encoding", "xor"},
                                                                      {"compression_format", "zstd"},
                                                                      {"checksum_format", "xxh3-128"}}));
}

TEST(PublicationManifest, DeltaManifestNamesItsBaseEncodingAndFraming) {
  EXPECT_EQ(manifest_metadata(delta_manifest(4, DeltaEncoding::Xor)),
            (std::map<std::string, std::string>{{"version", "000004"},
                                                {"base_version", "000003"},
                                                {"delta_encoding", "xor"},
                                                {"compression_format", "zstd"},
                                                {"checksum_format", "xxh3-128"}}));
  const PublicationManifest framed = delta_manifest(1, DeltaEncoding::Overwrite, PayloadFraming::Frames);
  EXPECT_EQ(framed.kind, PublicationKind::Delta);
  EXPECT_EQ(framed.base_version, std::optional<uint32_t>(0));
  EXPECT_EQ(framed.framing, PayloadFraming::Frames);
  EXPECT_EQ(manifest_metadata(framed), (std::map<std::string, std::string>{{"version", "000001"},
                                                                           {"base_version", "000000"},
                                                                           {"delta_encoding", "overwrite"},
                                                                           {"compression_format", "zstd-frames"},
                                                                           {"checksum_format", "xxh3-128"}}));
}

TEST(PublicationWriter, WritesReadablePublicationAtomically) {
  TempDir tmp;
  Store store(tmp.path());
  PublicationManifest m;
  m.version = 1;
  m.kind = PublicationKind::Delta;
  m.base_version = 0;
  m.encoding = DeltaEncoding::Xor;
  m.compression_format = "zstd";
  uint64_t stored = 0;
  {
    PublicationWriter writer(store.update_dir(1), m, /*max_shard_bytes=*/40, /*atomic=*/true, /*fsync=*/true);
    for (std::string name : {"a.weight", "b.weight", "c.weight"}) {
      Bytes payload = encode_delta(DeltaEncoding::Xor, canonical(name, 0), canonical(name, 1), 1);
      writer.add({name, DType::U8, {static_cast<int64_t>(payload.size())}}, payload,
                 xxh3_128_hex(canonical(name, 1)));
    }
    EXPECT_FALSE(fs::exists(store.update_dir(1)));  // nothing visible before commit
    stored = writer.commit();
  }
  Publication pub(store, 1);
  EXPECT_EQ(pub.tensor_names(), (std::vector<std::string>{"a.weight", "b.weight", "c.weight"}));
  // Every payload is 17 bytes here (9-byte header + 8-byte raw block), so 2 fit under 40 bytes: 2 shards.
  EXPECT_EQ(pub.payload("a.weight").size(), 17u);
  CheckpointIndex index = read_checkpoint_index(store.update_dir(1) / kIndexFileName);
  EXPECT_EQ(index.weight_map, (std::map<std::string, std::string>{{"a.weight", "model-00001-of-00002.safetensors"},
                                                                  {"b.weight", "model-00001-of-00002.safetensors"},
                                                                  {"c.weight", "model-00002-of-00002.safetensors"}}));
  EXPECT_EQ(index.total_size, 51u);
  EXPECT_EQ(stored, fs::file_size(store.update_dir(1) / "model-00001-of-00002.safetensors") +
                        fs::file_size(store.update_dir(1) / "model-00002-of-00002.safetensors"));
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(tmp.path() / "updates")) entries.push_back(e.path().filename());
  EXPECT_EQ(entries, (std::vector<std::string>{"weight_v000001"}));  // no temp directory left
  expect_error([&] { PublicationWriter(store.update_dir(1), m, 40, true, false); }, ErrorKind::Lineage,
               {"weight_v000001 already exists"});
}

TEST(PublicationWriter, StreamedShardsCarryChecksumsOfTheirBytes) {
  TempDir tmp;
  Store store(tmp.path());
  PublicationManifest m;
  m.version = 0;
  std::vector<TensorSpec> specs = {{"a.weight", DType::BF16, {2, 2}},
                                   {"empty.weight", DType::BF16, {0}},
                                   {"b.weight", DType::BF16, {2, 2}},
                                   {"c.weight", DType::F32, {3}}};
  Bytes c_bytes(12);
  for (size_t i = 0; i < c_bytes.size(); ++i) c_bytes[i] = static_cast<uint8_t>(0xC0 + i);
  Bytes all = canonical("a.weight", 0);
  Bytes b = canonical("b.weight", 0);
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c_bytes.begin(), c_bytes.end());
  {
    PublicationWriter writer(store.update_dir(0), m, /*max_shard_bytes=*/1 << 20, /*atomic=*/true, /*fsync=*/false);
    writer.begin_shard({specs[0], specs[1], specs[2]});
    // Pieces that straddle tensor boundaries: 3 + 10 + 3 bytes over tensors of 8, 0 and 8 bytes.
    std::span<const uint8_t> bytes(all);
    writer.append(bytes.subspan(0, 3));
    writer.append(bytes.subspan(3, 10));
    writer.append(bytes.subspan(13, 3));
    expect_error([&] { writer.commit(); }, ErrorKind::State, {"commit while a streamed shard is open"});
    writer.end_shard();
    writer.begin_shard({specs[3]});
    expect_error([&] { writer.append(Bytes(13)); }, ErrorKind::Format, {"exceeds the declared data size"});
    writer.append(bytes.subspan(16));
    writer.end_shard();
    writer.commit();
  }
  Publication pub(store, 0);
  EXPECT_TRUE(pub.is_full());
  EXPECT_EQ(pub.expected_checksum("a.weight"), xxh3_128_hex(canonical("a.weight", 0)));
  EXPECT_EQ(pub.expected_checksum("empty.weight"), xxh3_128_hex({}));
  EXPECT_EQ(pub.expected_checksum("b.weight"), xxh3_128_hex(canonical("b.weight", 0)));
  EXPECT_EQ(pub.expected_checksum("c.weight"), xxh3_128_hex(c_bytes));
  auto c = pub.payload("c.weight");
  EXPECT_EQ(Bytes(c.begin(), c.end()), c_bytes);
  CheckpointIndex index = read_checkpoint_index(store.update_dir(0) / kIndexFileName);
  EXPECT_EQ(index.weight_map.at("empty.weight"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(index.weight_map.at("c.weight"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(index.total_size, 28u);
}

TEST(PublicationWriter, StreamedShardsWithGivenChecksumsKeepThem) {
  // A DELTA streamed from spilled payloads: the checksums are the target's, not the payloads'.
  TempDir tmp;
  Store store(tmp.path());
  PublicationManifest m;
  m.version = 1;
  m.kind = PublicationKind::Delta;
  m.base_version = 0;
  m.encoding = DeltaEncoding::Xor;
  m.compression_format = "zstd";
  const Bytes a = encode_delta(DeltaEncoding::Xor, canonical("a.weight", 0), canonical("a.weight", 1), 1);
  const Bytes b = encode_delta(DeltaEncoding::Xor, canonical("b.weight", 0), canonical("b.weight", 1), 1);
  const TensorSpec sa{"a.weight", DType::U8, {static_cast<int64_t>(a.size())}};
  const TensorSpec sb{"b.weight", DType::U8, {static_cast<int64_t>(b.size())}};
  {
    PublicationWriter writer(store.update_dir(1), m, 1 << 20, /*atomic=*/true, /*fsync=*/true);
    expect_error([&] { writer.begin_shard({sa, sb}, {xxh3_128_hex(canonical("a.weight", 1))}); }, ErrorKind::Format,
                 {"shard of 2 tensors given 1 checksums"});
    expect_error([&] { writer.begin_shard({sa}, {"ABC"}); }, ErrorKind::Format,
                 {"tensor 'a.weight': checksum 'ABC' is not 32 lowercase hex characters"});
    writer.begin_shard({sa, sb}, {xxh3_128_hex(canonical("a.weight", 1)), xxh3_128_hex(canonical("b.weight", 1))});
    Bytes both = a;
    both.insert(both.end(), b.begin(), b.end());
    writer.append(std::span<const uint8_t>(both).subspan(0, 5));
    writer.append(std::span<const uint8_t>(both).subspan(5));
    writer.end_shard();
    writer.commit();
  }
  Publication pub(store, 1);
  EXPECT_EQ(pub.expected_checksum("a.weight"), xxh3_128_hex(canonical("a.weight", 1)));
  EXPECT_EQ(pub.expected_checksum("b.weight"), xxh3_128_hex(canonical("b.weight", 1)));
  const auto pa = pub.payload("a.weight");
  EXPECT_EQ(Bytes(pa.begin(), pa.end()), a);
  const auto pb = pub.payload("b.weight");
  EXPECT_EQ(Bytes(pb.begin(), pb.end()), b);
}

TEST(PublicationWriter, AbandonedWriterLeavesNothing) {
  TempDir tmp;
  Store store(tmp.path());
  PublicationManifest m;
  m.version = 0;
  {
    PublicationWriter writer(store.update_dir(0), m, 1 << 20, true, false);
    writer.begin_shard({{"a.weight", DType::BF16, {2, 2}}});
    writer.append(canonical("a.weight", 0));
    writer.end_shard();
    writer.begin_shard({{"b.weight", DType::BF16, {2, 2}}});
    writer.append(Bytes(3));
    expect_error([&] { writer.end_shard(); }, ErrorKind::Format, {"'b.weight' is incomplete"});
  }
  EXPECT_TRUE(fs::is_empty(tmp.path() / "updates"));
  EXPECT_FALSE(store.has(0));
}

TEST(PublicationWriter, PlainDirectoryMode) {
  TempDir tmp;
  fs::path dir = tmp.path() / "checkpoint";
  PublicationManifest m;
  m.version = 5;
  {
    PublicationWriter writer(dir, m, 1 << 20, /*atomic=*/false, /*fsync=*/true);
    writer.add({"a.weight", DType::BF16, {2, 2}}, canonical("a.weight", 5), xxh3_128_hex(canonical("a.weight", 5)));
    writer.commit();
  }
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.index().metadata, (std::map<std::string, std::string>{{"checksum_format", "xxh3-128"},
                                                                         {"version", "000005"}}));
  EXPECT_EQ(reader.shard_of("a.weight").metadata().at("a.weight"), xxh3_128_hex(canonical("a.weight", 5)));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"model-00001-of-00001.safetensors", "model.safetensors.index.json"}));
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(PublicationWriter, AddFileIsWrittenBesideIndexAndShards) {
  TempDir tmp;
  Store store(tmp.path());
  PublicationManifest m;
  m.version = 0;
  {
    PublicationWriter writer(store.update_dir(0), m, 1 << 20, /*atomic=*/true, /*fsync=*/true);
    writer.add({"a.weight", DType::BF16, {2, 2}}, canonical("a.weight", 0), xxh3_128_hex(canonical("a.weight", 0)));
    writer.add_file("config.json", "{\"first\": 1}\n");
    writer.add_file("config.json", "{\"model_type\": \"llama\"}\n");  // replaces the first content
    EXPECT_FALSE(fs::exists(store.update_dir(0)));                  // nothing in place before commit
    const uint64_t stored = writer.commit();
    EXPECT_EQ(stored, fs::file_size(store.update_dir(0) / "model-00001-of-00001.safetensors"));  // shards only
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(store.update_dir(0))) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model-00001-of-00001.safetensors",
                                             "model.safetensors.index.json"}));
  EXPECT_EQ(file_text(store.update_dir(0) / "config.json"), "{\"model_type\": \"llama\"}\n");
  EXPECT_EQ(Publication(store, 0).tensor_names(), std::vector<std::string>{"a.weight"});
}

TEST(PublicationWriter, AddFileRefusesNamesThatAreNotPlainFilesAndLeavesNothingWhenAbandoned) {
  TempDir tmp;
  fs::path dir = tmp.path() / "checkpoint";
  PublicationManifest m;
  m.version = 2;
  {
    PublicationWriter writer(dir, m, 1 << 20, /*atomic=*/false, /*fsync=*/false);
    const std::vector<std::string> names = {"", "sub/config.json", ".hidden", "..", kIndexFileName,
                                            "model-00001-of-00001.safetensors"};
    for (const std::string& name : names) {
      expect_error([&] { writer.add_file(name, "x"); }, ErrorKind::Format,
                   {fmt::format("'{}' is not a plain file name", name)});
    }
    writer.add_file("config.json", "{}");
  }  // abandoned before commit: no file written
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace wsb
