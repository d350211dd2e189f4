// Synthetic publisher: determinism, perturbation statistics, gate/up sharing and agreement between the published
// store, synthesize_canonical and write_full_checkpoint (llama-tiny-bf16, the CI preset).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "models/checkpoint/checkpoint.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "core/numeric.hpp"
#include "models/profile/hf_config_write.hpp"
#include "models/profile/profile.hpp"
#include "models/quant/codecs.hpp"
#include "models/quant/quant_role.hpp"
#include "publisher/publisher.hpp"
#include "publication/publication.hpp"
#include "tests/support/profile_dims.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using test::TempDir;
using test::expect_error;

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;



const ModelProfile& tiny() {
  static const ModelProfile profile = find_profile("llama-tiny-bf16", WSBENCH_PROFILES_DIR);
  return profile;
}

// Shapes of llama-tiny-bf16 (hidden 128, intermediate 256, 8 heads / 4 kv heads of 16, vocab 512, 2 layers):
// embed + lm_head 2 * 65536, per layer 2 * 128 + 16384 + 2 * 8192 + 16384 + 3 * 32768, final norm 128 elements.
constexpr uint64_t kTinyElements = 2 * 65536 + 2 * (2 * 128 + 16384 + 2 * 8192 + 16384 + 3 * 32768) + 128;

Bytes synth(const TensorSpec& t, uint64_t seed, uint32_t version, std::optional<double> density = std::nullopt) {
  Bytes out(t.bytes());
  synthesize_canonical(tiny(), t, seed, version, density, out);
  return out;
}

uint16_t code_at(const Bytes& b, size_t i) { return static_cast<uint16_t>(b[2 * i] | b[2 * i + 1] << 8); }

/// xxh3 of every file under `dir`, by relative path.
std::map<std::string, std::string> file_hashes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string().starts_with(".latest.lock")) continue;
    std::ifstream in(e.path(), std::ios::binary);
    Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out[fs::relative(e.path(), dir).string()] = xxh3_128_hex(bytes);
  }
  return out;
}

PublishOptions options_for(const fs::path& store, uint64_t seed) {
  PublishOptions o;
  o.store = store;
  o.seed = seed;
  o.first_version = 0;
  o.last_version = 3;
  o.max_shard_bytes = 300'000;  // several FULL shards even for the tiny model
  return o;
}

/// Positions (element indices) whose code differs between two BF16 buffers.
std::vector<size_t> changed(const Bytes& a, const Bytes& b) {
  std::vector<size_t> out;
  for (size_t i = 0; i < a.size() / 2; ++i) {
    if (code_at(a, i) != code_at(b, i)) out.push_back(i);
  }
  return out;
}

TEST(Publisher, Basics) {
  EXPECT_EQ(default_density(DType::BF16), 0.01);
  EXPECT_EQ(default_density(DType::F16), 0.01);
  EXPECT_EQ(default_density(DType::F32), 0.01);
  EXPECT_EQ(default_density(DType::F8_E4M3), 0.006);
  EXPECT_EQ(default_density(DType::U8), 0.003);  // packed E2M1 or E8M0 scales
  expect_error([] { default_density(DType::I32); }, ErrorKind::Format, {"dtype I32"});
  EXPECT_EQ(selection_group("model.layers.3.mlp.gate_proj.weight"), "model.layers.3.mlp.gate_up_proj.weight");
  EXPECT_EQ(selection_group("model.layers.3.mlp.up_proj.weight"), "model.layers.3.mlp.gate_up_proj.weight");
  EXPECT_EQ(selection_group("model.layers.3.mlp.down_proj.weight"), "model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(selection_group("model.layers.1.mlp.experts.7.up_proj.weight"),
            "model.layers.1.mlp.experts.7.gate_up_proj.weight");
  EXPECT_EQ(tiny().canonical_tensors().size(), 21u);
  uint64_t elements = 0;
  for (const TensorSpec& t : tiny().canonical_tensors()) elements += t.numel();
  EXPECT_EQ(elements, kTinyElements);
}

TEST(Publisher, InitialValuesInTheirRanges) {
  for (const TensorSpec& t : tiny().canonical_tensors()) {
    Bytes b = synth(t, 1, 0);
    double lo = 1e9, hi = -1e9, sum = 0;
    for (size_t i = 0; i < t.numel(); ++i) {
      double v = bf16_to_float(code_at(b, i));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    double mean = sum / static_cast<double>(t.numel());
    SCOPED_TRACE(t.name);
    if (t.name.ends_with("norm.weight")) {
      EXPECT_GE(lo, 0.95 - 1e-3);
      EXPECT_LE(hi, 1.05 + 1e-3);
      EXPECT_NEAR(mean, 1.0, 0.01);
    } else if (t.name == "model.embed_tokens.weight") {
      EXPECT_GE(lo, -0.5);
      EXPECT_LE(hi, 0.5);
      EXPECT_GT(hi - lo, 0.99);  // the whole range is used
    } else {
      double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
      EXPECT_GE(lo, -bound * 1.004);  // BF16 rounding (2^-8 relative)
      EXPECT_LE(hi, bound * 1.004);
      EXPECT_GT(hi - lo, 1.98 * bound);
      EXPECT_NEAR(mean, 0.0, 0.1 * bound);
    }
  }
  // Different tensors, seeds and profiles draw different values.
  auto tensors = tiny().canonical_tensors();
  EXPECT_NE(synth(tensors[2], 1, 0), synth(tensors[2], 2, 0));
  Bytes k = synth(tensors[3], 1, 0), v = synth(tensors[4], 1, 0);  // k_proj, v_proj: same shape
  EXPECT_NE(k, v);
}

TEST(Publisher, GptOssBf16ExpertsDrawOverTheirFanInAndMoveLowBits) {
  // gpt-oss BF16 experts are [E, in, out]: gate_up_proj [8, 96, 448] draws within 1/sqrt(96), down_proj [8, 224, 96]
  // within 1/sqrt(224), not over their last dims; versions flip the lowest mantissa bit like every BF16 tensor.
  const ModelProfile oss = find_profile("gpt-oss-tiny-bf16", WSBENCH_PROFILES_DIR);
  for (const TensorSpec& t : oss.canonical_tensors()) {
    if (!t.name.ends_with(".experts.gate_up_proj") && !t.name.ends_with(".experts.down_proj")) continue;
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.shape.size(), 3u);
    Bytes v0(t.bytes()), v1(t.bytes());
    synthesize_canonical(oss, t, 5, 0, std::nullopt, v0);
    double hi = 0;
    for (size_t i = 0; i < t.numel(); ++i) hi = std::max(hi, std::abs(double{bf16_to_float(code_at(v0, i))}));
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
    EXPECT_LE(hi, bound * 1.004);
    EXPECT_GT(hi, bound * 0.99);
    synthesize_canonical(oss, t, 5, 1, std::nullopt, v1);
    const std::vector<size_t> diff = changed(v0, v1);
    for (size_t i : diff) ASSERT_EQ(code_at(v0, i) ^ code_at(v1, i), 1) << i;
    const double n = static_cast<double>(t.numel()), sd = std::sqrt(n * 0.01 * 0.99);
    EXPECT_NEAR(static_cast<double>(diff.size()), n * 0.01, 6 * sd);
  }
}

TEST(Publisher, PerturbationStaysFiniteFlipsOneBitAtDensity) {
  uint64_t total = 0;
  for (const TensorSpec& t : tiny().canonical_tensors()) {
    Bytes v0 = synth(t, 5, 0);
    Bytes v1 = v0;
    uint64_t moved = perturb_version(tiny(), t, 5, 1, 0.01, v1);
    std::vector<size_t> diff = changed(v0, v1);
    EXPECT_EQ(diff.size(), moved) << t.name;
    for (size_t i : diff) {
      ASSERT_EQ(code_at(v0, i) ^ code_at(v1, i), 1) << t.name << " element " << i;
      ASSERT_NE(code_at(v1, i) & 0x7F80, 0x7F80) << t.name << " element " << i;  // exponent not all ones
    }
    EXPECT_EQ(synth(t, 5, 1), v1);  // synthesize_canonical(1) = v0 + the version-1 step
    total += moved;
  }
  // Binomial(n = 426624, p = 0.01): mean 4266.24, sd sqrt(n p (1 - p)) = 64.99; accept mean +- 6 sd.
  double n = static_cast<double>(kTinyElements);
  double mean = n * 0.01;
  double sd = std::sqrt(n * 0.01 * 0.99);
  EXPECT_NEAR(static_cast<double>(total), mean, 6 * sd);
  EXPECT_GT(static_cast<double>(total), 3876.0);
  EXPECT_LT(static_cast<double>(total), 4657.0);
}

TEST(Publisher, DensityExtremesAndErrors) {
  TensorSpec t{"model.norm.weight", DType::BF16, {128}};
  Bytes b = synth(t, 1, 0), c = b;
  EXPECT_EQ(perturb_version(tiny(), t, 1, 1, 0.0, c), 0u);
  EXPECT_EQ(c, b);
  EXPECT_EQ(perturb_version(tiny(), t, 1, 1, 1.0, c), 128u);
  EXPECT_EQ(changed(b, c).size(), 128u);
  expect_error([&] { perturb_version(tiny(), t, 1, 1, 1.5, c); }, ErrorKind::Format,
               {"density 1.5", "'model.norm.weight'"});
  Bytes wrong(3);
  expect_error([&] { synthesize_canonical(tiny(), t, 1, 0, std::nullopt, wrong); }, ErrorKind::Mismatch,
               {"'model.norm.weight'", "buffer of 3 bytes, expected 256"});
  TensorSpec u8{"token_type_ids", DType::U8, {4}};  // a U8 that is neither packed E2M1 nor E8M0 scales
  Bytes four(4);
  expect_error([&] { synthesize_canonical(tiny(), u8, 1, 0, std::nullopt, four); }, ErrorKind::Format,
               {"'token_type_ids'", "dtype U8"});
}

TEST(Publisher, OtherFloatDtypes) {
  TensorSpec f32{"model.layers.0.self_attn.q_proj.weight", DType::F32, {16, 64}};
  Bytes a(f32.bytes());
  synthesize_canonical(tiny(), f32, 3, 0, std::nullopt, a);
  Bytes b = a;
  uint64_t moved = perturb_version(tiny(), f32, 3, 1, 0.25, b);
  uint64_t seen = 0;
  for (size_t i = 0; i < f32.numel(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a[4 * i], 4);
    std::memcpy(&y, &b[4 * i], 4);
    float v;
    std::memcpy(&v, &x, 4);
    EXPECT_LE(std::fabs(v), 0.125f);
    EXPECT_TRUE(x == y || (x ^ y) == 1u);
    seen += x != y;
  }
  EXPECT_EQ(seen, moved);
  EXPECT_NEAR(static_cast<double>(moved), 256.0, 6 * std::sqrt(1024 * 0.25 * 0.75));
  TensorSpec f16{"model.norm.weight", DType::F16, {64}};
  Bytes h(f16.bytes());
  synthesize_canonical(tiny(), f16, 3, 2, std::nullopt, h);
  for (size_t i = 0; i < f16.numel(); ++i) {
    float v = f16_to_float(code_at(h, i));
    EXPECT_GE(v, 0.949f);
    EXPECT_LE(v, 1.051f);
  }
}

TEST(Publisher, GateAndUpShareChangedPositions) {
  for (int layer = 0; layer < 2; ++layer) {
    std::string prefix = "model.layers." + std::to_string(layer) + ".mlp.";
    TensorSpec gate{prefix + "gate_proj.weight", DType::BF16, {256, 128}};
    TensorSpec up{prefix + "up_proj.weight", DType::BF16, {256, 128}};
    TensorSpec down{prefix + "down_proj.weight", DType::BF16, {128, 256}};  // same element count, own group
    for (uint32_t v = 1; v <= 2; ++v) {
      auto g = changed(synth(gate, 9, v - 1), synth(gate, 9, v));
      auto u = changed(synth(up, 9, v - 1), synth(up, 9, v));
      auto d = changed(synth(down, 9, v - 1), synth(down, 9, v));
      EXPECT_GT(g.size(), 200u);
      EXPECT_EQ(g, u) << prefix << " version " << v;
      EXPECT_NE(g, d);
    }
  }
}

TEST(Publisher, DeterministicAcrossRunsAndSeedSensitive) {
  TempDir a, b, c;
  auto stats = publish(tiny(), options_for(a.path(), 11));
  publish(tiny(), options_for(b.path(), 11));
  publish(tiny(), options_for(c.path(), 12));
  auto ha = file_hashes(a.path()), hb = file_hashes(b.path()), hc = file_hashes(c.path());
  EXPECT_EQ(ha, hb);
  // FULL shards of <= 300,000 bytes: [embed + layer 0 up to gate_proj] 295424, [layer 0 up/down + layer 1 up to
  // gate_proj] 295424, [rest] 262400; one delta shard per version; 4 indexes; FULL v0's config.json; latest.
  EXPECT_EQ(ha.count("latest"), 1u);
  EXPECT_EQ(ha.count("updates/weight_v000000/config.json"), 1u);
  EXPECT_EQ(ha.count("updates/weight_v000000/model-00003-of-00003.safetensors"), 1u);
  EXPECT_EQ(ha.count("updates/weight_v000003/model-00001-of-00001.safetensors"), 1u);
  EXPECT_EQ(ha.size(), 1u + 4 + 3 + 3 + 1);
  CheckpointIndex v0 = read_checkpoint_index(Store(a.path()).update_dir(0) / kIndexFileName);
  EXPECT_EQ(v0.weight_map.at("model.layers.0.mlp.gate_proj.weight"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(v0.weight_map.at("model.layers.0.mlp.up_proj.weight"), "model-00002-of-00003.safetensors");
  EXPECT_EQ(v0.weight_map.at("lm_head.weight"), "model-00003-of-00003.safetensors");
  EXPECT_EQ(v0.total_size, 853248u);
  EXPECT_EQ(v0.metadata, (std::map<std::string, std::string>{{"checksum_format", "xxh3-128"}, {"version", "000000"}}));
  CheckpointIndex v3 = read_checkpoint_index(Store(a.path()).update_dir(3) / kIndexFileName);
  EXPECT_EQ(v3.metadata, (std::map<std::string, std::string>{{"base_version", "000002"},
                                                             {"checksum_format", "xxh3-128"},
                                                             {"compression_format", "zstd"},
                                                             {"delta_encoding", "xor"},
                                                             {"version", "000003"}}));
  EXPECT_EQ(ha.size(), hc.size());
  for (const auto& [file, hash] : ha) {
    if (file == "latest" || file.ends_with(".json")) continue;
    EXPECT_NE(hash, hc.at(file)) << file;
  }
  ASSERT_EQ(stats.size(), 4u);
  for (uint32_t v = 0; v <= 3; ++v) {
    const PublicationStats& s = stats[v];
    EXPECT_EQ(s.version, v);
    EXPECT_EQ(s.full, v == 0);
    EXPECT_EQ(s.canonical_bytes, 2 * kTinyElements);
    EXPECT_EQ(s.canonical_bytes, tiny().canonical_bytes());
    uint64_t files = 0;
    for (const auto& e : fs::directory_iterator(Store(a.path()).update_dir(v))) {
      if (e.path().extension() == ".safetensors") files += fs::file_size(e.path());
    }
    EXPECT_EQ(s.stored_bytes, files);
    if (v == 0) {
      EXPECT_EQ(s.changed_values, 0u);
      EXPECT_GT(s.stored_bytes, s.canonical_bytes);
    } else {
      EXPECT_NEAR(static_cast<double>(s.changed_values), 0.01 * kTinyElements, 6 * std::sqrt(kTinyElements * 0.0099));
      EXPECT_LT(s.stored_bytes, s.canonical_bytes / 10);
    }
    std::printf("[ publish ] llama-tiny-bf16 v%u %s: canonical %llu B, stored %llu B, changed %llu, %.2f ms\n", v,
                s.full ? "FULL " : "DELTA", static_cast<unsigned long long>(s.canonical_bytes),
                static_cast<unsigned long long>(s.stored_bytes), static_cast<unsigned long long>(s.changed_values),
                s.seconds * 1e3);
  }
  EXPECT_EQ(Store(a.path()).latest(), 3u);
  EXPECT_EQ(Store(a.path()).versions(), (std::vector<uint32_t>{0, 1, 2, 3}));
}

TEST(Publisher, ThreadCountNeverChangesTheBytes) {
  // Workers produce tensors out of order; the store must be byte-identical to the single-threaded one.
  TempDir one, many, glm_one, glm_many;
  PublishOptions o1 = options_for(one.path(), 11), o4 = options_for(many.path(), 11);
  o4.threads = 4;
  publish(tiny(), o1);
  publish(tiny(), o4);
  EXPECT_EQ(file_hashes(one.path()), file_hashes(many.path()));
  const ModelProfile glm = find_profile("glm-tiny-fp8", WSBENCH_PROFILES_DIR);  // quantized roles, many small tensors
  PublishOptions g1 = options_for(glm_one.path(), 5), g3 = options_for(glm_many.path(), 5);
  g3.threads = 3;
  publish(glm, g1);
  publish(glm, g3);
  EXPECT_EQ(file_hashes(glm_one.path()), file_hashes(glm_many.path()));
  TempDir full1, full4;
  write_full_checkpoint(tiny(), 33, 2, std::nullopt, full1.path() / "c", 200'000, 1);
  write_full_checkpoint(tiny(), 33, 2, std::nullopt, full4.path() / "c", 200'000, 4);
  EXPECT_EQ(file_hashes(full1.path()), file_hashes(full4.path()));
  EXPECT_EQ(file_hashes(full4.path()).size(), 7u);  // index, config.json, 5 shards of <= 200,000 bytes (853,248)
}

TEST(Publisher, PublishedStoreMatchesSynthesis) {
  TempDir tmp;
  PublishOptions o = options_for(tmp.path(), 21);
  publish(tiny(), o);
  Store store(tmp.path());
  Publication full(store, 0);
  EXPECT_TRUE(full.is_full());
  UpdatePlan plan = plan_update(store, 0, 3);
  ASSERT_EQ(plan.steps.size(), 3u);
  for (const auto& step : plan.steps) EXPECT_EQ(step->manifest().encoding, DeltaEncoding::Xor);
  for (const TensorSpec& t : tiny().canonical_tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(full.entry(t.name).spec(), t);
    auto stored = full.payload(t.name);
    Bytes data(stored.begin(), stored.end());
    EXPECT_EQ(data, synth(t, 21, 0));
    EXPECT_EQ(full.expected_checksum(t.name), xxh3_128_hex(synth(t, 21, 0)));
    for (const auto& step : plan.steps) {
      DecodedDelta d = decode_delta(DeltaEncoding::Xor, step->payload(t.name), t.bytes(), t.name);
      apply_delta_swap(d, data);
      Bytes expected = synth(t, 21, step->version());
      EXPECT_EQ(step->expected_checksum(t.name), xxh3_128_hex(expected));
      EXPECT_EQ(data, expected);
    }
  }
}

TEST(Publisher, OverwriteEncodingAndAppend) {
  TempDir whole, parts;
  PublishOptions o = options_for(whole.path(), 4);
  o.encoding = DeltaEncoding::Overwrite;
  publish(tiny(), o);
  // The same lineage published in two runs: 0..1, then 2..3 appended.
  PublishOptions first = o;
  first.store = parts.path();
  first.last_version = 1;
  publish(tiny(), first);
  EXPECT_EQ(Store(parts.path()).latest(), 1u);
  PublishOptions append = first;
  append.first_version = 2;
  append.last_version = 3;
  auto stats = publish(tiny(), append);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].version, 2u);
  EXPECT_FALSE(stats[0].full);
  EXPECT_EQ(file_hashes(whole.path()), file_hashes(parts.path()));

  Store store(parts.path());
  Publication v2(store, 2);
  EXPECT_EQ(v2.manifest().encoding, DeltaEncoding::Overwrite);
  TensorSpec t = tiny().canonical_tensors()[0];
  DecodedDelta d = decode_delta(DeltaEncoding::Overwrite, v2.payload(t.name), t.bytes(), t.name);
  Bytes data = synth(t, 4, 1);
  apply_delta_swap(d, data);
  EXPECT_EQ(data, synth(t, 4, 2));

  PublishOptions again = append;  // versions 2..3 exist: publications are immutable
  expect_error([&] { publish(tiny(), again); }, ErrorKind::Lineage,
               {"version 000002 is already published in " + parts.path().string()});
  PublishOptions gap = append;
  gap.first_version = 5;
  gap.last_version = 6;
  expect_error([&] { publish(tiny(), gap); }, ErrorKind::Lineage,
               {"cannot append version 000005: its base version 000004 is not published"});
  PublishOptions other_seed = append;
  other_seed.first_version = 4;
  other_seed.last_version = 4;
  other_seed.seed = 5;
  expect_error([&] { publish(tiny(), other_seed); }, ErrorKind::Checksum,
               {"tensor 'model.embed_tokens.weight' of published version 000003", "seed 5"});
  // Same model and seed, another density: said as such (version 0 does not depend on the density).
  PublishOptions other_density = other_seed;
  other_density.seed = append.seed;
  other_density.density = 0.05;
  expect_error([&] { publish(tiny(), other_density); }, ErrorKind::Mismatch,
               {"cannot append to " + parts.path().string() +
                ": density differs: published version 000003 was not made with density 0.05 (tensor "
                "'model.embed_tokens.weight'), while version 000000 is the synthetic model 'llama-tiny-bf16' with seed "
                "4: append with the density the store was published with"});
  EXPECT_FALSE(store.has(4));
  EXPECT_EQ(store.latest(), 3u);
  PublishOptions backwards = append;
  backwards.first_version = 3;
  backwards.last_version = 2;
  expect_error([&] { publish(tiny(), backwards); }, ErrorKind::Format, {"first_version 3 is after last_version 2"});
}

TEST(Publisher, RangedChecksumsForDeltasAndAppendingToThem) {
  TempDir whole, parts;
  // A vocabulary of 8192 makes the embedding and lm_head 2 MiB each: two ranges of 1 MiB.
  ModelProfile scaled = tiny();
  scaled.dims.vocab = 8192;
  PublishOptions o = options_for(whole.path(), 8);
  o.checksum_range_bytes = 1 << 20;
  publish(scaled, o);
  Store store(whole.path());
  EXPECT_EQ(Publication(store, 0).manifest().checksum_format, "xxh3-128");
  for (uint32_t v = 1; v <= 3; ++v) {
    const Publication p(store, v);
    EXPECT_EQ(p.manifest().checksum_format, "xxh3-128-ranges");
    for (const TensorSpec& t : scaled.canonical_tensors()) {
      Bytes target(t.bytes());
      synthesize_canonical(scaled, t, 8, v, std::nullopt, target);
      EXPECT_EQ(p.expected_checksum(t.name), tensor_checksum_text(target, 1 << 20)) << t.name;
    }
    EXPECT_EQ(p.expected_checksum("model.embed_tokens.weight").size(), 2u * 32);
  }
  // Appending to a ranged lineage checks the base against its own format and writes the same files.
  PublishOptions first = o;
  first.store = parts.path();
  first.last_version = 1;
  publish(scaled, first);
  PublishOptions append = first;
  append.first_version = 2;
  append.last_version = 3;
  publish(scaled, append);
  EXPECT_EQ(file_hashes(whole.path()), file_hashes(parts.path()));
  PublishOptions bad = o;
  bad.store = parts.path() / "other";
  bad.checksum_range_bytes = 12345;
  expect_error([&] { publish(scaled, bad); }, ErrorKind::Format,
               {"checksum_range_bytes must be 0 (one xxh3-128 per tensor) or a multiple of 1 MiB (1048576), got 12345"});
}

TEST(Publisher, FullCheckpointOfAnyVersion) {
  TempDir tmp;
  fs::path dir = tmp.path() / "native-v2";
  write_full_checkpoint(tiny(), 33, 2, std::nullopt, dir, 200'000);
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.index().metadata.at("version"), "000002");
  EXPECT_EQ(reader.index().metadata.count("delta_encoding"), 0u);
  EXPECT_EQ(reader.index().total_size, tiny().canonical_bytes());
  EXPECT_GT(reader.shards().size(), 1u);
  auto tensors = tiny().canonical_tensors();
  EXPECT_EQ(reader.tensor_names().size(), tensors.size());
  for (const TensorSpec& t : tensors) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(reader.entry(t.name).spec(), t);
    auto bytes = reader.data(t.name);
    Bytes expected = synth(t, 33, 2);
    EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), expected);
    EXPECT_EQ(reader.shard_of(t.name).metadata().at(t.name), xxh3_128_hex(expected));
  }
}

// ---- Quantized dtypes. Hand-built TensorSpecs with the checkpoint names of the quantized profiles;
// the profile only contributes its id and hidden size (llama-tiny-bf16: 128).

const std::string kExpert = "model.layers.1.mlp.experts.5.";

float f32_at(const Bytes& b, size_t i) {
  float v;
  std::memcpy(&v, &b[4 * i], 4);
  return v;
}

/// Binomial(n, p) count within 6 standard deviations of its mean.
void expect_binomial(uint64_t count, uint64_t n, double p, const std::string& what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(count), mean, 6 * sd) << what << ": n " << n << ", p " << p;
}

TEST(PublisherQuant, DefaultDensityPerRole) {
  auto density = [](std::string name, DType dtype, Shape shape = {8, 8}) {
    return default_density(TensorSpec{std::move(name), dtype, std::move(shape)});
  };
  EXPECT_EQ(density("model.layers.0.self_attn.q_proj.weight", DType::F8_E4M3), 0.006);
  EXPECT_EQ(density("model.layers.0.self_attn.q_proj.weight_scale", DType::F32, {8, 1}), 0.006);
  EXPECT_EQ(density(kExpert + "gate_proj.weight", DType::U8), 0.003);
  EXPECT_EQ(density(kExpert + "gate_proj.weight_scale", DType::F8_E4M3), 0.003);
  EXPECT_EQ(density(kExpert + "gate_proj.weight_scale_2", DType::F32, {}), 0.003);
  EXPECT_EQ(density(kExpert + "gate_proj.input_scale", DType::F32, {}), 0.0);
  EXPECT_EQ(density("model.layers.0.mlp.experts.gate_up_proj_blocks", DType::U8, {2, 8, 3, 16}), 0.003);
  EXPECT_EQ(density("model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {2, 8, 3}), 0.003);
  EXPECT_EQ(density("model.layers.0.mlp.experts.gate_up_proj_bias", DType::BF16, {2, 8}), 0.01);
  EXPECT_EQ(density("model.layers.0.mlp.gate.e_score_correction_bias", DType::F32, {8}), 0.01);
  EXPECT_EQ(density("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", DType::BF16), 0.01);
  expect_error([&] { density("position_ids", DType::I64); }, ErrorKind::Format, {"tensor 'position_ids'", "I64"});
}

TEST(PublisherQuant, E4M3WeightsMoveOneMantissaStepAndNeverNan) {
  const TensorSpec w{"model.layers.0.self_attn.o_proj.weight", DType::F8_E4M3, {64, 256}};
  Bytes v0 = synth(w, 3, 0);
  // v0: RNE of U(-448, 448): no NaN, both signs, the top code present (it exercises the step toward zero).
  uint64_t top = 0, negative = 0;
  double sum = 0;
  for (uint8_t c : v0) {
    ASSERT_FALSE(e4m3_is_nan(c));
    top += (c & 0x7F) == 0x7E;
    negative += (c & 0x80) != 0;
    sum += e4m3_to_float(c);
  }
  EXPECT_GT(top, 150u);  // [432, 448] of [-448, 448]: 1.8 % of 16384 = 293 expected
  expect_binomial(negative, w.numel(), 0.5, "negative codes");
  EXPECT_NEAR(sum / static_cast<double>(w.numel()), 0.0, 10.0);
  Bytes prev = v0, cur = v0;
  uint64_t total = 0, top_steps = 0;
  for (uint32_t v = 1; v <= 100; ++v) {
    const uint64_t moved = perturb_version(tiny(), w, 3, v, 0.02, cur);
    uint64_t seen = 0;
    for (size_t i = 0; i < cur.size(); ++i) {
      if (cur[i] == prev[i]) continue;
      ++seen;
      ASSERT_FALSE(e4m3_is_nan(cur[i])) << "version " << v << " element " << i;
      ASSERT_EQ(cur[i] & 0xF8, prev[i] & 0xF8) << "sign and exponent kept, element " << i;
      ASSERT_EQ(std::abs((cur[i] & 7) - (prev[i] & 7)), 1) << "one mantissa step, element " << i;
      top_steps += (prev[i] & 0x7F) == 0x7E;
      if ((prev[i] & 0x7F) == 0x7E) {
        ASSERT_EQ(cur[i] & 0x7F, 0x7D);
      }
    }
    ASSERT_EQ(seen, moved) << "version " << v;
    total += moved;
    prev = cur;
  }
  EXPECT_GT(top_steps, 20u);
  expect_binomial(total, 100 * w.numel(), 0.02, "E4M3 moves over 100 versions");
  EXPECT_EQ(synth(w, 3, 7, 0.02), [&] {
    Bytes b = v0;
    for (uint32_t v = 1; v <= 7; ++v) perturb_version(tiny(), w, 3, v, 0.02, b);
    return b;
  }());
  // Default density 0.006 per version.
  const TensorSpec big{"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {512, 512}};
  Bytes b = synth(big, 1, 0);
  expect_binomial(perturb_version(tiny(), big, 1, 1, default_density(big), b), big.numel(), 0.006, "FP8 density");
  // Only 0x7E / 0xFE: every selected one steps toward zero; a NaN input lands on the top finite code.
  const TensorSpec edge{"model.layers.0.mlp.up_proj.weight", DType::F8_E4M3, {2, 2}};
  Bytes e{0x7E, 0xFE, 0x7F, 0x00};
  EXPECT_EQ(perturb_version(tiny(), edge, 1, 1, 1.0, e), 4u);
  EXPECT_EQ(e, (Bytes{0x7D, 0xFD, 0x7E, 0x01}));
}

TEST(PublisherQuant, Fp8ChannelScalesAndDequantizedRange) {
  const TensorSpec w{"model.layers.0.self_attn.q_proj.weight", DType::F8_E4M3, {96, 128}};
  const TensorSpec s{"model.layers.0.self_attn.q_proj.weight_scale", DType::F32, {96, 1}};
  Bytes wb = synth(w, 2, 0), sb = synth(s, 2, 0);
  const double base = 1.0 / (448.0 * std::sqrt(128.0));  // hidden of llama-tiny-bf16
  double lo = 1e9, hi = 0, wmax = 0;
  for (size_t r = 0; r < 96; ++r) {
    const double scale = f32_at(sb, r);
    lo = std::min(lo, scale / base);
    hi = std::max(hi, scale / base);
    for (size_t c = 0; c < 128; ++c) wmax = std::max(wmax, std::fabs(e4m3_to_float(wb[r * 128 + c]) * scale));
  }
  EXPECT_GE(lo, 0.75);
  EXPECT_LT(hi, 1.25);
  EXPECT_GT(hi - lo, 0.4);
  EXPECT_LE(wmax, 1.25 / std::sqrt(128.0));
  EXPECT_GT(wmax, 0.7 / std::sqrt(128.0));
  // F32 scales move by their lowest mantissa bit at the FP8 density.
  Bytes moved = sb;
  EXPECT_EQ(perturb_version(tiny(), s, 2, 1, 1.0, moved), 96u);
  for (size_t r = 0; r < 96; ++r) {
    uint32_t a, b;
    std::memcpy(&a, &sb[4 * r], 4);
    std::memcpy(&b, &moved[4 * r], 4);
    EXPECT_EQ(a ^ b, 1u);
  }
}

TEST(PublisherQuant, PackedE2M1MovesOneMagnitudeStepPerNibble) {
  const TensorSpec w{kExpert + "down_proj.weight", DType::U8, {512, 256}};  // [N, K/2]: 262144 E2M1 codes
  Bytes v0 = synth(w, 4, 0);
  std::array<uint64_t, 16> histogram{};
  for (uint8_t b : v0) {
    ++histogram[b & 0xF];
    ++histogram[b >> 4];
  }
  for (size_t code = 0; code < 16; ++code) expect_binomial(histogram[code], 2 * w.numel(), 1.0 / 16, "E2M1 code");
  Bytes prev = v0, cur = v0;
  uint64_t total = 0;
  for (uint32_t v = 1; v <= 20; ++v) {
    const uint64_t moved = perturb_version(tiny(), w, 4, v, default_density(w), cur);
    uint64_t seen = 0;
    for (size_t i = 0; i < 2 * w.numel(); ++i) {
      const uint8_t a = e2m1_packed_at(prev.data(), i), b = e2m1_packed_at(cur.data(), i);
      if (a == b) continue;
      ++seen;
      ASSERT_EQ(a & 0x8, b & 0x8) << "sign kept, nibble " << i;
      ASSERT_EQ(std::abs((a & 7) - (b & 7)), 1) << "one magnitude step, nibble " << i;
    }
    ASSERT_EQ(seen, moved) << "version " << v;
    total += moved;
    prev = cur;
  }
  expect_binomial(total, 20 * 2 * w.numel(), 0.003, "NVFP4 nibbles over 20 versions");
  const TensorSpec blocks{"model.layers.0.mlp.experts.gate_up_proj_blocks", DType::U8, {2, 64, 90, 16}};
  Bytes bb = synth(blocks, 4, 0);
  expect_binomial(perturb_version(tiny(), blocks, 4, 1, default_density(blocks), bb), 2 * blocks.numel(), 0.003,
                  "MXFP4 block nibbles");
}

TEST(PublisherQuant, E8M0ScalesStayInRangeAndNeverFF) {
  // gpt-oss: K = 32 * 90 = 2880 -> e0 = round(log2(1 / (6 sqrt(2880)))) = -8: codes 118 (2^-9) and 119 (2^-8).
  const TensorSpec s{"model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {2, 512, 90}};
  Bytes v0 = synth(s, 6, 0);
  uint64_t low = 0;
  for (uint8_t c : v0) {
    ASSERT_TRUE(c == 118 || c == 119) << int(c);
    low += c == 118;
  }
  expect_binomial(low, s.numel(), 0.5, "2^-9 scales");
  Bytes prev = v0, cur = v0;
  uint64_t total = 0;
  for (uint32_t v = 1; v <= 30; ++v) {
    const uint64_t moved = perturb_version(tiny(), s, 6, v, default_density(s), cur);
    uint64_t seen = 0;
    for (size_t i = 0; i < cur.size(); ++i) {
      if (cur[i] == prev[i]) continue;
      ++seen;
      ASSERT_EQ(std::abs(cur[i] - prev[i]), 1) << "exponent +-1, element " << i;
      ASSERT_TRUE(cur[i] == 118 || cur[i] == 119) << "range kept, element " << i;
    }
    ASSERT_EQ(seen, moved);
    total += moved;
    prev = cur;
  }
  expect_binomial(total, 30 * s.numel(), 0.003, "E8M0 moves over 30 versions");
  // The largest scale steps down; 0xFF never appears, even from an all-0xFE buffer at density 1.
  const TensorSpec f8{"model.layers.0.mlp.experts.down_proj_scales", DType::F8_E8M0, {3}};
  Bytes top{0xFE, 0xFD, 0x00};
  EXPECT_EQ(perturb_version(tiny(), f8, 1, 1, 1.0, top), 3u);
  EXPECT_EQ(top, (Bytes{0xFD, 0xFC, 0x01}));
}

TEST(PublisherQuant, Nvfp4ScalesInputScaleImmutableAndGlobalScalesEqual) {
  const TensorSpec gate_ws{kExpert + "gate_proj.weight_scale", DType::F8_E4M3, {512, 448}};  // K = 7168
  Bytes ws = synth(gate_ws, 8, 0);
  float lo = 1e9f, hi = 0;
  for (uint8_t c : ws) {
    lo = std::min(lo, e4m3_to_float(c));
    hi = std::max(hi, e4m3_to_float(c));
  }
  // U(0.75, 1.25) * 2^11 / (6 sqrt(7168)) = [3.02, 5.04) -> E4M3 3.0 .. 5.0.
  EXPECT_EQ(lo, 3.0f);
  EXPECT_EQ(hi, 5.0f);
  Bytes ws1 = ws;
  expect_binomial(perturb_version(tiny(), gate_ws, 8, 1, default_density(gate_ws), ws1), gate_ws.numel(), 0.003,
                  "NVFP4 block scales");

  // input_scale: 2^-8, never changed, whatever the density.
  const TensorSpec input{kExpert + "gate_proj.input_scale", DType::F32, {}};
  EXPECT_TRUE(is_immutable(tiny(), input));
  Bytes in0 = synth(input, 8, 0);
  EXPECT_EQ(f32_at(in0, 0), 0x1p-8f);
  Bytes in1 = in0;
  EXPECT_EQ(perturb_version(tiny(), input, 8, 1, 1.0, in1), 0u);
  EXPECT_EQ(in1, in0);
  EXPECT_EQ(synth(input, 8, 50, 1.0), in0);

  // weight_scale_2 of gate and up are equal in every version (shared selection group); down moves on its own.
  const TensorSpec gate{kExpert + "gate_proj.weight_scale_2", DType::F32, {}};
  const TensorSpec up{kExpert + "up_proj.weight_scale_2", DType::F32, {}};
  const TensorSpec down{kExpert + "down_proj.weight_scale_2", DType::F32, {}};
  EXPECT_FALSE(is_immutable(tiny(), gate));
  Bytes g = synth(gate, 8, 0), u = synth(up, 8, 0), d = synth(down, 8, 0);
  EXPECT_EQ(f32_at(g, 0), 0x1p-11f);
  uint64_t gate_moves = 0, differs_from_down = 0;
  for (uint32_t v = 1; v <= 64; ++v) {
    gate_moves += perturb_version(tiny(), gate, 8, v, 0.5, g);
    perturb_version(tiny(), up, 8, v, 0.5, u);
    perturb_version(tiny(), down, 8, v, 0.5, d);
    ASSERT_EQ(g, u) << "version " << v;
    differs_from_down += g != d;
  }
  EXPECT_GT(gate_moves, 16u);
  EXPECT_GT(differs_from_down, 0u);
  EXPECT_EQ(synth(gate, 8, 64, 0.5), g);
  EXPECT_EQ(synth(up, 8, 64, 0.5), g);
}

TEST(PublisherQuant, ConfiguredImmutablePrefixes) {
  ModelProfile profile = tiny();
  profile.raw["immutable_prefixes"] = {"model.layers.0.", "lm_head"};
  const TensorSpec frozen{"model.layers.0.mlp.down_proj.weight", DType::BF16, {16, 16}};
  const TensorSpec head{"lm_head.weight", DType::BF16, {16, 16}};
  const TensorSpec free{"model.layers.1.mlp.down_proj.weight", DType::BF16, {16, 16}};
  EXPECT_TRUE(is_immutable(profile, frozen));
  EXPECT_TRUE(is_immutable(profile, head));
  EXPECT_FALSE(is_immutable(profile, free));
  EXPECT_FALSE(is_immutable(tiny(), frozen));
  Bytes a(frozen.bytes()), b(head.bytes()), c(free.bytes());
  EXPECT_EQ(perturb_version(profile, frozen, 1, 1, 1.0, a), 0u);
  EXPECT_EQ(perturb_version(profile, head, 1, 1, 1.0, b), 0u);
  EXPECT_EQ(perturb_version(profile, free, 1, 1, 1.0, c), 256u);
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FullCheckpointConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(FullCheckpointConfig, FullCheckpointsCarryConfigJsonDeltasDoNot) {
  const ModelProfile profile = find_profile(GetParam(), WSBENCH_PROFILES_DIR);
  TempDir store, reference;
  PublishOptions o = options_for(store.path(), 5);
  o.last_version = 2;
  publish(profile, o);
  const Store s(store.path());
  EXPECT_EQ(file_text(s.update_dir(0) / kHfConfigFileName), hf_config_text(profile));
  EXPECT_FALSE(fs::exists(s.update_dir(1) / kHfConfigFileName));
  EXPECT_FALSE(fs::exists(s.update_dir(2) / kHfConfigFileName));
  write_full_checkpoint(profile, 5, 2, std::nullopt, reference.path(), 300'000);
  EXPECT_EQ(file_text(reference.path() / kHfConfigFileName), hf_config_text(profile));
  // Appending deltas to the store leaves FULL v0 as it was and writes no config.
  o.first_version = 3;
  o.last_version = 3;
  publish(profile, o);
  EXPECT_FALSE(fs::exists(s.update_dir(3) / kHfConfigFileName));
}

TEST_P(FullCheckpointConfig, FullCheckpointRoundTripsThroughProfileFromHfDir) {
  // A FULL directory the publisher wrote is a Hugging Face checkpoint: profile_from_hf_dir reads its config back to
  // the profile's dims and finds exactly the profile's tensors in its shards.
  const ModelProfile profile = find_profile(GetParam(), WSBENCH_PROFILES_DIR);
  TempDir store, reference;
  publish(profile, options_for(store.path(), 3));
  write_full_checkpoint(profile, 3, 1, std::nullopt, reference.path(), 300'000);
  for (const fs::path& dir : {Store(store.path()).update_dir(0), reference.path()}) {
    SCOPED_TRACE(dir.string());
    const ModelProfile back = profile_from_hf_dir(dir);
    test::expect_same_profile(back, profile);
    std::vector<std::string> names;
    for (const TensorSpec& t : back.canonical_tensors()) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(CheckpointReader(dir).tensor_names(), names);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, FullCheckpointConfig,
                         ::testing::Values("llama-tiny-bf16", "glm-tiny-fp8", "glm-tiny-bf16", "kimi-tiny-nvfp4",
                                           "kimi-tiny-bf16", "gpt-oss-tiny-mxfp4", "gpt-oss-tiny-bf16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-' || c == '.') c = '_';
                           return name;
                         });

TEST(Publisher, BadConfigJsonNeverMakesAFullPublicationUnreadable) {
  // wsbench never reads config.json: a broken one must not stop opening, planning or seeding from the store.
  TempDir store;
  publish(tiny(), options_for(store.path(), 3));
  const Store s(store.path());
  const std::vector<std::string> bad_configs = {"{not json", "", std::string("\xff\x00binary", 8)};
  for (const std::string& bad : bad_configs) {
    std::ofstream(s.update_dir(0) / kHfConfigFileName, std::ios::binary | std::ios::trunc) << bad;
    const Publication full(s, 0);
    EXPECT_TRUE(full.is_full());
    const TensorSpec t = tiny().canonical_tensors().front();
    const auto bytes = full.payload(t.name);
    EXPECT_EQ(xxh3_128_hex(bytes), full.expected_checksum(t.name));
    EXPECT_EQ(xxh3_128_hex(synth(t, 3, 0)), full.expected_checksum(t.name));
    EXPECT_EQ(plan_update(s, 0, 3).steps.size(), 3u);
    EXPECT_EQ(CheckpointReader(s.update_dir(0)).tensor_names().size(), tiny().canonical_tensors().size());
  }
  fs::remove(s.update_dir(0) / kHfConfigFileName);  // and a FULL without one (an older store) reads the same
  EXPECT_TRUE(Publication(s, 0).is_full());
}

}  // namespace
}  // namespace wsb
