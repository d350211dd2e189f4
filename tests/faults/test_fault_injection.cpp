// Fault injection through the engine: every case turns one good publication of a tiny store into one bad input,
// and a prepare of it must fail with the exact error (naming the tensor, file or field), leave the served version,
// every rank's storage checksums, the storage pointers and the probe fingerprint as they were, refuse a commit of
// it, and, once the store is repaired, let a later prepare + commit reach exactly a native load of the target.
// Each case runs in both sync modes on the tiny preset of every quantization family.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "models/forward/forward.hpp"
#include "models/quant/quant_role.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/served.hpp"
#include "tests/support/store_edit.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kSeed = 7;
constexpr uint32_t kLast = 2;

using test::Served;

/// What `e` serves, its fingerprint from a short probe (2 new tokens).
Served served(Engine& e) { return test::served(e, "fp?", 2); }

/// The tensor every payload fault targets: one whose codes can be invalid in the preset's quantization format
/// (an E4M3 weight or block scale, an E8M0 scale, else a BF16 weight), so the same tensor also carries the NaN case.
TensorSpec victim_of(const ModelProfile& profile) {
  std::optional<TensorSpec> best;
  int best_rank = 99;
  for (const auto& spec : profile.canonical_tensors()) {
    const CodeFormat format = quant_role(spec).format;
    const int rank = format == CodeFormat::E4M3 ? 0 : format == CodeFormat::E8M0 ? 1
                     : format == CodeFormat::Ieee && spec.dtype == DType::BF16 && spec.shape.size() == 2 ? 2
                                                                                                         : 99;
    if (rank < best_rank) best_rank = rank, best = spec;
  }
  if (!best) throw std::logic_error("no tensor with checkable codes in " + profile.id);
  return *best;
}

/// Published stores and native references of one preset, built once per process: every case copies a pristine
/// store, so no edit can leak into another case.
struct Preset {
  test::TempDir dir;
  ModelProfile profile;
  TensorSpec victim;
  std::map<DeltaEncoding, fs::path> stores;
  std::map<uint32_t, Served> native;
  std::map<uint32_t, fs::path> native_dirs;

  fs::path store(DeltaEncoding encoding) {
    auto it = stores.find(encoding);
    if (it != stores.end()) return it->second;
    const fs::path path = dir / (encoding == DeltaEncoding::Xor ? "store-xor" : "store-overwrite");
    test::publish_tiny(path, kLast, kSeed, encoding, profile.id);
    return stores[encoding] = path;
  }
  fs::path native_dir(uint32_t version) {
    auto it = native_dirs.find(version);
    if (it != native_dirs.end()) return it->second;
    const fs::path path = dir / ("native" + std::to_string(version));
    write_full_checkpoint(profile, kSeed, version, std::nullopt, path);
    return native_dirs[version] = path;
  }
  Bytes canonical(uint32_t version, const std::string& tensor) {
    CheckpointReader reader(native_dir(version));
    auto bytes = reader.data(tensor);
    return {bytes.begin(), bytes.end()};
  }
  /// What a fresh engine natively loaded from the FULL checkpoint of `version` serves (mode-independent).
  const Served& reference(uint32_t version, const std::string& mode) {
    auto it = native.find(version);
    if (it != native.end()) return it->second;
    Engine engine(EngineOptions{profile, 2, test::sync_of(mode), dir / "unused-store", dir / ("native-work" + std::to_string(version)), 2});
    engine.load_native(native_dir(version), version);
    return native[version] = served(engine);
  }
};

Preset& preset(const std::string& id) {
  static std::map<std::string, std::unique_ptr<Preset>> presets;
  auto& slot = presets[id];
  if (!slot) {
    slot = std::make_unique<Preset>();
    slot->profile = test::tiny_profile(id);
    slot->victim = victim_of(slot->profile);
  }
  return *slot;
}

class Faults : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  const std::string& mode() const { return std::get<1>(GetParam()); }
  Preset& p() { return preset(std::get<0>(GetParam())); }
  const std::string& T() { return p().victim.name; }
  fs::path store() const { return dir_ / "store"; }

  /// Copies a pristine store of `encoding`, boots an engine at v0 and records what it serves.
  void start(DeltaEncoding encoding = DeltaEncoding::Xor) {
    encoding_ = encoding;
    fs::copy(p().store(encoding), store(), fs::copy_options::recursive);
    engine_ = std::make_unique<Engine>(EngineOptions{p().profile, 2, test::sync_of(mode()), store(), dir_ / "work", 2});
    engine_->load_native(Store(store()).update_dir(0), 0);
    editor_ = std::make_unique<test::StoreEditor>(store());
  }
  test::StoreEditor& edit() { return *editor_; }
  std::string shard() { return edit().shard_name(1, T()); }
  fs::path shard_path() { return edit().shard_path(1, T()); }
  std::string index() { return edit().index_path(1).string(); }
  std::string where() { return "publication 000001 shard '" + shard() + "' (" + shard_path().string() + ")"; }

  /// prepare(target) must throw exactly (kind, message) and change nothing; a commit of it must be refused.
  void expect_fault(uint32_t target, ErrorKind kind, const std::string& message) {
    const Served before = served(*engine_);
    const auto pointers = engine_->storage_pointers();
    try {
      engine_->prepare(target);
      ADD_FAILURE() << "prepare " << target << " succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
      EXPECT_EQ(std::string(e.what()), message);
      EXPECT_EQ(e.retryable(), kind == ErrorKind::Truncated);  // only "not yet published" may be retried
    }
    EXPECT_THROW(engine_->commit(target), Error);
    EXPECT_TRUE(engine_->healthy());
    EXPECT_EQ(served(*engine_), before);
    EXPECT_EQ(engine_->storage_pointers(), pointers);
  }
  /// Puts the pristine store back, then prepares and commits `target`: it must equal a native load.
  void repair_and_update(uint32_t target = 1) {
    fs::remove_all(store());
    fs::copy(p().store(encoding_), store(), fs::copy_options::recursive);
    engine_->prepare(target);
    engine_->commit(target);
    EXPECT_EQ(served(*engine_), p().reference(target, mode()));
  }
  /// xor payload of the victim whose mask takes v0 to `target_bytes`.
  Bytes xor_mask_to(const Bytes& target_bytes) {
    Bytes mask = p().canonical(0, T());
    for (size_t i = 0; i < mask.size(); ++i) mask[i] ^= target_bytes[i];
    return mask;
  }
  Bytes mask() { return xor_mask_to(p().canonical(1, T())); }
  uint64_t n() { return p().victim.bytes(); }

  test::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<test::StoreEditor> editor_;
  DeltaEncoding encoding_ = DeltaEncoding::Xor;
};

Bytes overwrite_body(uint32_t count, std::vector<uint32_t> positions, std::vector<uint8_t> values, size_t extra = 0) {
  std::string body = test::le_bytes(count, 4);
  for (uint32_t pos : positions) body += test::le_bytes(pos, 4);
  for (uint8_t v : values) body += static_cast<char>(v);
  body += std::string(extra, '\x5a');
  return zstd_compress({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, 3);
}

// ---- xor payloads ----

TEST_P(Faults, FlippedPayloadByte) {
  start();
  Bytes m = mask();
  const uint64_t k = n() / 2;
  Bytes frame = test::ZstdFrameBuilder(n()).raw(m).finish();
  frame[test::ZstdFrameBuilder::raw_offset(k)] ^= 0x01;
  edit().set_payload(1, T(), frame);
  Bytes wrong = p().canonical(1, T());
  wrong[k] ^= 0x01;
  expect_fault(1, ErrorKind::Checksum,
               "tensor '" + T() + "': xxh3-128 of version 000001 is " + xxh3_128_hex(wrong) +
                   ", publication says " + xxh3_128_hex(p().canonical(1, T())));
  repair_and_update();
}

TEST_P(Faults, TruncatedZstdFrame) {
  start();
  Bytes frame = test::ZstdFrameBuilder(n()).raw(mask()).finish();
  ASSERT_GT(frame.size(), 5u);
  frame.erase(frame.end() - 5, frame.end());  // not resize(): GCC's -O1 ASan build sees a growing path and warns
  edit().set_payload(1, T(), frame);
  expect_fault(1, ErrorKind::Format, "xor mask of tensor '" + T() + "': truncated zstd frame");
  repair_and_update();
}

TEST_P(Faults, TrailingBytesAfterFrame) {
  start();
  Bytes frame = edit().payload(1, T());
  frame.insert(frame.end(), {0x28, 0xb5, 0x2f});
  edit().set_payload(1, T(), frame);
  expect_fault(1, ErrorKind::Format, "xor mask of tensor '" + T() + "': 3 bytes after the zstd frame");
  repair_and_update();
}

TEST_P(Faults, MaskLongerThanTensor) {
  start();
  Bytes m = mask();
  m.push_back(0);
  edit().set_payload(1, T(), zstd_compress(m, 3));
  expect_fault(1, ErrorKind::Format,
               fmt::format("xor mask of tensor '{}': mask of {} bytes declared, tensor has {} bytes", T(), n() + 1, n()));
  repair_and_update();
}

TEST_P(Faults, MaskShorterThanTensor) {
  start();
  Bytes m = mask();
  m.pop_back();
  edit().set_payload(1, T(), zstd_compress(m, 3));
  expect_fault(1, ErrorKind::Format,
               fmt::format("xor mask of tensor '{}': mask of {} bytes declared, tensor has {} bytes", T(), n() - 1, n()));
  repair_and_update();
}

TEST_P(Faults, NotAZstdFrame) {
  start();
  Bytes frame = edit().payload(1, T());
  frame[0] ^= 0xFF;  // first byte of the magic number
  edit().set_payload(1, T(), frame);
  expect_fault(1, ErrorKind::Format,
               fmt::format("xor mask of tensor '{}': not a zstd frame ({} bytes, magic number absent)", T(),
                           frame.size()));
  repair_and_update();
}

/// Peak resident set of this process, in bytes.
uint64_t peak_rss() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

constexpr uint64_t kBomb = uint64_t{4} << 30;
constexpr uint64_t kBombSlack = uint64_t{64} << 20;  // far below the bomb: nothing tensor-sized beyond the bound

TEST_P(Faults, XorFrameProducingFarMoreThanItDeclares) {
  start();
  // Declares exactly the tensor's size (so the header check passes), then expands to 4 GiB of RLE blocks.
  edit().set_payload(1, T(), test::ZstdFrameBuilder(n()).rle(0, kBomb).finish());
  const uint64_t peak = peak_rss();
  expect_fault(1, ErrorKind::Format,
               fmt::format("xor mask of tensor '{}': corrupt zstd frame (Destination buffer is too small)", T()));
  EXPECT_LT(peak_rss(), peak + kBombSlack);
  repair_and_update();
}

TEST_P(Faults, NanCodeInPayload) {
  start();
  // The checksum is the publisher's of the bad bytes: only the code check can refuse them.
  Bytes target = p().canonical(1, T());
  const CodeFormat format = quant_role(p().victim).format;
  std::string code;
  std::string meaning;
  if (format == CodeFormat::E4M3) {
    target[0] = 0x7F;
    code = "E4M3 code 0x7F", meaning = "which is NaN";
  } else if (format == CodeFormat::E8M0) {
    target[0] = 0xFF;
    code = "E8M0 code 0xFF", meaning = "which is NaN (an E8M0 scale of 0xFF)";
  } else {
    target[0] = 0xC0, target[1] = 0x7F;
    code = "BF16 code 0x7FC0", meaning = "which is NaN or infinity";
  }
  edit().set_payload(1, T(), zstd_compress(xor_mask_to(target), 3));
  edit().set_checksum(1, T(), xxh3_128_hex(target));
  std::string coords = p().victim.shape.size() < 2 ? "" : " [0";
  for (size_t d = 1; d < p().victim.shape.size(); ++d) coords += ", 0";
  if (!coords.empty()) coords += "]";
  expect_fault(1, ErrorKind::Format,
               fmt::format("publication 000001: tensor '{}' ({} {}): element 0{} holds {}, {} (1 invalid code in the "
                           "tensor)",
                           T(), dtype_name(p().victim.dtype), shape_string(p().victim.shape), coords, code, meaning));
  repair_and_update();
}

// ---- overwrite payloads ----

TEST_P(Faults, OverwritePositionsUnsorted) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), overwrite_body(2, {5, 3}, {1, 2}));
  expect_fault(1, ErrorKind::Format,
               "overwrite delta of tensor '" + T() + "': positions not strictly increasing: 3 after 5 (index 1)");
  repair_and_update();
}

TEST_P(Faults, OverwritePositionsDuplicated) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), overwrite_body(3, {1, 3, 3}, {1, 2, 3}));
  expect_fault(1, ErrorKind::Format, "overwrite delta of tensor '" + T() + "': duplicate position 3 (index 2)");
  repair_and_update();
}

TEST_P(Faults, OverwritePositionOutOfRange) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), overwrite_body(2, {0, static_cast<uint32_t>(n())}, {1, 2}));
  expect_fault(1, ErrorKind::Format,
               fmt::format("overwrite delta of tensor '{}': position {} (index 1) out of range for {} bytes", T(), n(),
                           n()));
  repair_and_update();
}

TEST_P(Faults, OverwriteCountLargerThanPayload) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), overwrite_body(1000, {1}, {7}));
  expect_fault(1, ErrorKind::Format,
               "overwrite delta of tensor '" + T() + "': count 1000 needs 5004 bytes, payload has 9");
  repair_and_update();
}

TEST_P(Faults, OverwriteTrailingBytes) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), overwrite_body(1, {1}, {7}, 2));
  expect_fault(1, ErrorKind::Format,
               "overwrite delta of tensor '" + T() + "': 2 trailing bytes after the 1 overwrite values");
  repair_and_update();
}

TEST_P(Faults, OverwriteDecompressionBomb) {
  start(DeltaEncoding::Overwrite);
  edit().set_payload(1, T(), test::ZstdFrameBuilder(kBomb).rle(0, kBomb).finish());
  const uint64_t peak = peak_rss();
  expect_fault(1, ErrorKind::Format,
               fmt::format("overwrite delta of tensor '{}': zstd frame declares {} bytes, beyond the bound of {}", T(),
                           kBomb, 4 + 5 * n()));
  EXPECT_LT(peak_rss(), peak + kBombSlack);
  repair_and_update();
}

// ---- checksums ----

TEST_P(Faults, WrongChecksum) {
  start();
  std::string fake = xxh3_128_hex(p().canonical(1, T()));
  fake[0] = fake[0] == '0' ? '1' : '0';
  edit().set_checksum(1, T(), fake);
  expect_fault(1, ErrorKind::Checksum,
               "tensor '" + T() + "': xxh3-128 of version 000001 is " + xxh3_128_hex(p().canonical(1, T())) +
                   ", publication says " + fake);
  repair_and_update();
}

TEST_P(Faults, ChecksumOfAnotherAlgorithm) {
  start();
  // SHA-256 of the empty string: well-formed hex, wrong length for xxh3-128.
  edit().set_checksum(1, T(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_fault(1, ErrorKind::Format,
               where() + ": checksum of tensor '" + T() +
                   "' has 64 hex chars: a checksum of another algorithm (checksum_format is xxh3-128, 32 lowercase "
                   "hex chars)");
  repair_and_update();
}

TEST_P(Faults, UnknownChecksumFormat) {
  start();
  edit().set_manifest_field(1, "checksum_format", "sha256");
  expect_fault(1, ErrorKind::Format, index() + ": metadata 'checksum_format' 'sha256' is unknown (known: xxh3-128, xxh3-128-ranges)");
  repair_and_update();
}

// ---- manifest and lineage ----

TEST_P(Faults, WrongBaseVersion) {
  start();
  edit().set_manifest_field(2, "base_version", "000000");
  expect_fault(2, ErrorKind::Lineage, "update plan 000000 -> 000002: version 000002 has base_version 000000, expected 000001");
  repair_and_update(2);
}

TEST_P(Faults, GapInLineage) {
  start();
  fs::rename(edit().dir(1), dir_ / "v1-elsewhere");
  expect_fault(2, ErrorKind::Lineage,
               "update plan 000000 -> 000002 in " + store().string() + ": gap, version 000001 is not published");
  repair_and_update(2);
}

TEST_P(Faults, ManifestVersionDisagreesWithDirectory) {
  start();
  edit().set_manifest_field(1, "version", "000002");
  expect_fault(1, ErrorKind::Lineage, index() + ": metadata 'version' 000002 differs from the directory's version 000001");
  repair_and_update();
}

TEST_P(Faults, UnknownDeltaEncoding) {
  start();
  edit().set_manifest_field(1, "delta_encoding", "bsdiff");
  expect_fault(1, ErrorKind::Format, index() + ": metadata 'delta_encoding' 'bsdiff' is not xor or overwrite");
  repair_and_update();
}

TEST_P(Faults, LatestPointingBackwards) {
  start();
  engine_->prepare(1);
  engine_->commit(1);
  edit().set_latest("000000\n");
  // A follower prepares what `latest` names; the pointer itself also refuses to be moved back.
  expect_fault(*Store(store()).latest(), ErrorKind::State,
               "prepare 000000: target is not newer than the served version 000001");
  edit().set_latest("000002\n");
  test::expect_error([&] { Store(store()).advance_latest(1); }, ErrorKind::Lineage,
                     {(store() / "latest").string() + ": cannot move latest back from 000002 to 000001 (forward only)"});
  repair_and_update(2);
}

// ---- tensor sets, dtypes, shapes, names ----

TEST_P(Faults, MissingTensor) {
  start();
  edit().edit_shard(1, T(), [&](auto& tensors, auto& metadata) {
    std::erase_if(tensors, [&](const auto& t) { return t.spec.name == T(); });
    metadata.erase(T());
  });
  edit().edit_index(1, [&](CheckpointIndex& index) { index.weight_map.erase(T()); });
  expect_fault(1, ErrorKind::Missing, "publication 000001: tensor '" + T() + "' missing from the delta");
  repair_and_update();
}

TEST_P(Faults, ExtraTensor) {
  start();
  const std::string extra = "model.layers.0.mlp.extra_proj.weight";
  const Bytes payload = zstd_compress(Bytes(64, 0), 3);
  edit().edit_shard(1, T(), [&](std::vector<test::EditableTensor>& tensors, auto& metadata) {
    tensors.push_back({TensorSpec{extra, DType::U8, {static_cast<int64_t>(payload.size())}}, payload});
    metadata[extra] = xxh3_128_hex(Bytes(64, 0));
  });
  const std::string name = shard();
  edit().edit_index(1, [&](CheckpointIndex& index) { index.weight_map[extra] = name; });
  expect_fault(1, ErrorKind::Mismatch, "publication 000001: tensor '" + extra + "' is not a tensor of the model");
  repair_and_update();
}

TEST_P(Faults, DeltaTensorDtypeMismatch) {
  start();
  edit().edit_shard(1, T(), [&](std::vector<test::EditableTensor>& tensors, auto&) {
    for (auto& t : tensors) {
      if (t.spec.name == T()) t.spec.dtype = DType::I8;
    }
  });
  const uint64_t bytes = edit().payload(1, T()).size();
  expect_fault(1, ErrorKind::Format,
               fmt::format("{}: delta tensor '{}' is I8 [{}], expected a 1-D U8 payload (shape = byte length)", where(),
                           T(), bytes));
  repair_and_update();
}

TEST_P(Faults, DeltaTensorShapeMismatch) {
  start();
  uint64_t bytes = 0;
  edit().edit_shard(1, T(), [&](std::vector<test::EditableTensor>& tensors, auto&) {
    for (auto& t : tensors) {
      if (t.spec.name == T()) bytes = t.bytes.size(), t.spec.shape = {1, static_cast<int64_t>(bytes)};
    }
  });
  expect_fault(1, ErrorKind::Format,
               fmt::format("{}: delta tensor '{}' is U8 [1, {}], expected a 1-D U8 payload (shape = byte length)",
                           where(), T(), bytes));
  repair_and_update();
}

TEST_P(Faults, NameInHeaderAndIndexButNotInChecksumMap) {
  start();
  edit().edit_shard(1, T(), [&](auto&, auto& metadata) { metadata.erase(T()); });
  expect_fault(1, ErrorKind::Mismatch,
               where() + ": tensor '" + T() +
                   "' is in the shard header and the index weight_map but missing from the checksum map (__metadata__)");
  repair_and_update();
}

TEST_P(Faults, NameInIndexButNotInShard) {
  start();
  edit().edit_shard(1, T(), [&](auto& tensors, auto& metadata) {
    std::erase_if(tensors, [&](const auto& t) { return t.spec.name == T(); });
    metadata.erase(T());
  });
  expect_fault(1, ErrorKind::Mismatch,
               where() + ": tensor '" + T() +
                   "' is in the index weight_map but missing from the shard header and the checksum map (__metadata__)");
  repair_and_update();
}

TEST_P(Faults, NameOnlyInChecksumMap) {
  start();
  const std::string ghost = "model.layers.0.self_attn.ghost.weight";
  edit().edit_shard(1, T(), [&](auto&, auto& metadata) { metadata[ghost] = std::string(32, 'a'); });
  expect_fault(1, ErrorKind::Mismatch,
               where() + ": tensor '" + ghost +
                   "' is in the checksum map (__metadata__) but missing from the shard header and the index weight_map");
  repair_and_update();
}

// ---- shard paths ----

TEST_P(Faults, ShardPathWithDotDot) {
  start();
  const std::string bad = "../" + shard();
  edit().edit_index_json(1, [&](nlohmann::json& doc) { doc["weight_map"][T()] = bad; });
  expect_fault(1, ErrorKind::Format, index() + ": shard path '" + bad + "' contains '..'");
  repair_and_update();
}

TEST_P(Faults, AbsoluteShardPath) {
  start();
  const std::string bad = shard_path().string();
  edit().edit_index_json(1, [&](nlohmann::json& doc) { doc["weight_map"][T()] = bad; });
  expect_fault(1, ErrorKind::Format, index() + ": shard path '" + bad + "' is absolute");
  repair_and_update();
}

TEST_P(Faults, SymlinkToShardOutsideTheStore) {
  start();
  const fs::path outside = dir_ / "outside.safetensors";
  fs::rename(shard_path(), outside);
  fs::create_symlink(outside, shard_path());
  expect_fault(1, ErrorKind::Format,
               index() + ": shard '" + shard() + "' resolves to " + fs::canonical(outside).string() +
                   ", outside the checkpoint directory " + fs::canonical(edit().dir(1)).string());
  repair_and_update();
}

TEST_P(Faults, SymlinkToFileOutsideTheStore) {
  start();
  // Not a safetensors file: the escape must be reported, not whatever its bytes look like as a header.
  const fs::path outside = dir_ / "secret.txt";
  test::write_bytes(outside, "root:x:0:0:root:/root:/bin/bash\n");
  fs::remove(shard_path());
  fs::create_symlink(outside, shard_path());
  expect_fault(1, ErrorKind::Format,
               index() + ": shard '" + shard() + "' resolves to " + fs::canonical(outside).string() +
                   ", outside the checkpoint directory " + fs::canonical(edit().dir(1)).string());
  repair_and_update();
}

// ---- safetensors headers ----

TEST_P(Faults, HeaderLengthBeyondLimit) {
  start();
  test::StoreEditor::set_header_length(shard_path(), kSafetensorsMaxHeaderBytes + 1);
  expect_fault(1, ErrorKind::Format,
               shard_path().string() + ": header length 100000001 exceeds the limit of 100000000 bytes");
  repair_and_update();
}

TEST_P(Faults, HeaderLengthBeyondFile) {
  start();
  const uint64_t size = fs::file_size(shard_path());
  test::StoreEditor::set_header_length(shard_path(), size);
  expect_fault(1, ErrorKind::Truncated,
               fmt::format("{}: header length {} extends beyond end of file (file is {} bytes)", shard_path().string(),
                           size, size));
  repair_and_update();
}

/// The shard's entries sorted by data offset.
std::vector<SafetensorsEntry> by_offset(const fs::path& shard) {
  SafetensorsFile file(shard);
  std::vector<SafetensorsEntry> entries = file.entries();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  return entries;
}

TEST_P(Faults, OverlappingDataOffsets) {
  start();
  const auto entries = by_offset(shard_path());
  ASSERT_GE(entries.size(), 2u);
  const SafetensorsEntry& first = entries[0];
  const SafetensorsEntry& second = entries[1];
  test::StoreEditor::edit_header_json(shard_path(), [&](nlohmann::json& doc) {
    doc[second.name]["data_offsets"] = {second.begin - 1, second.end - 1};
  });
  expect_fault(1, ErrorKind::Format,
               fmt::format("{}: tensor '{}' data_offsets [{}, {}] overlap tensor '{}' data_offsets [{}, {}]",
                           shard_path().string(), second.name, second.begin - 1, second.end - 1, first.name,
                           first.begin, first.end));
  repair_and_update();
}

TEST_P(Faults, DataOffsetsBeyondEndOfFile) {
  start();
  const SafetensorsEntry last = by_offset(shard_path()).back();
  const uint64_t available = last.end;
  test::StoreEditor::edit_header_json(shard_path(), [&](nlohmann::json& doc) {
    doc[last.name]["data_offsets"] = {last.begin, last.end + 16};
    doc[last.name]["shape"] = {last.bytes() + 16};
  });
  expect_fault(1, ErrorKind::Truncated,
               fmt::format("{}: data end {} lies beyond end of file (data buffer holds {} bytes)", shard_path().string(),
                           available + 16, available));
  repair_and_update();
}

TEST_P(Faults, NonUtf8HeaderKey) {
  start();
  size_t at = 0;
  test::StoreEditor::edit_header_text(shard_path(), [&](std::string& text) {
    at = text.find("\"" + T() + "\"") + 1 + T().size();
    text.insert(at, "\xff");
  });
  expect_fault(1, ErrorKind::Format, fmt::format("{}: header: invalid UTF-8 at byte {}", shard_path().string(), at + 1));
  repair_and_update();
}

TEST_P(Faults, DuplicateHeaderKey) {
  start();
  test::StoreEditor::edit_header_text(shard_path(), [&](std::string& text) {
    text.insert(1, "\"" + T() + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},");
  });
  expect_fault(1, ErrorKind::Format, shard_path().string() + ": header: duplicate key '" + T() + "'");
  repair_and_update();
}

TEST_P(Faults, DuplicateChecksumKey) {
  start();
  test::StoreEditor::edit_header_text(shard_path(), [&](std::string& text) {
    const size_t open = text.find("\"__metadata__\":{") + std::string("\"__metadata__\":{").size();
    text.insert(open, "\"" + T() + "\":\"" + std::string(32, '0') + "\",");
  });
  expect_fault(1, ErrorKind::Format,
               shard_path().string() + ": header: duplicate key '" + T() + "' in '__metadata__'");
  repair_and_update();
}

TEST_P(Faults, StoreFileShorterThanDeclaredIsRetryable) {
  start();
  const uint64_t available = by_offset(shard_path()).back().end;
  fs::resize_file(shard_path(), fs::file_size(shard_path()) - 3);
  expect_fault(1, ErrorKind::Truncated,
               fmt::format("{}: data end {} lies beyond end of file (data buffer holds {} bytes)", shard_path().string(),
                           available, available - 3));
  repair_and_update();
}

INSTANTIATE_TEST_SUITE_P(Tiny, Faults,
                         ::testing::Combine(::testing::Values(std::string("llama-tiny-bf16"), std::string("glm-tiny-fp8"),
                                                              std::string("kimi-tiny-nvfp4"),
                                                              std::string("gpt-oss-tiny-mxfp4"),
                                                              std::string("gpt-oss-tiny-bf16")),
                                            ::testing::Values(std::string("disk"), std::string("cpu"))),
                         test::PairParamName());

}  // namespace
}  // namespace wsb
