// Updates through every sync mode on the embedded engine: exact equality with a native load, storage identity,
// the state-machine rules at the engine, and bad inputs that must change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "engine/engine.hpp"
#include "core/errors.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;
const std::string kTensor = "model.layers.1.mlp.down_proj.weight";
const char* const kPrompt = "update probe";

using test::Served;

/// (mode, encoding, TP size): at TP 1 cpu mode keeps most canonical tensors inside its rank images, so every
/// rule here also covers folds that write the runtime bytes in place.
class EngineUpdates : public ::testing::TestWithParam<std::tuple<std::string, DeltaEncoding, int>> {
 protected:
  static int tp() { return std::get<2>(GetParam()); }
  void SetUp() override { test::publish_tiny(store(), 3, kSeed, std::get<1>(GetParam())); }
  std::filesystem::path store() const { return dir_ / "store"; }
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version) {
    auto engine = std::make_unique<Engine>(EngineOptions{test::tiny_profile(), tp(), test::sync_of(std::get<0>(GetParam())), store(),
                                                         dir_ / ("work" + std::to_string(counter_++)), 2});
    engine->load_native(checkpoint, version);
    return engine;
  }
  std::unique_ptr<Engine> boot_v0() { return boot(Store(store()).update_dir(0), 0); }
  Served served(Engine& e) { return test::served(e, kPrompt); }
  /// The reference: a fresh engine natively loaded from the publisher's FULL checkpoint of `version`.
  Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    if (!std::filesystem::exists(dir)) write_full_checkpoint(test::tiny_profile(), kSeed, version, std::nullopt, dir);
    auto engine = boot(dir, version);
    return served(*engine);
  }
  /// Expects prepare(target) to fail naming `needle`, with nothing served changed, the engine still serving.
  void expect_rejected(Engine& engine, uint32_t target, std::vector<ErrorKind> kinds, const std::string& needle) {
    const Served before = served(engine);
    try {
      engine.prepare(target);
      ADD_FAILURE() << "prepare succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::find(kinds.begin(), kinds.end(), e.kind()), kinds.end()) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_TRUE(engine.healthy());
    EXPECT_EQ(served(engine), before);
  }

  test::TempDir dir_;
  int counter_ = 0;
};

TEST_P(EngineUpdates, UpdateEqualsNativeLoadAndKeepsStorageIdentity) {
  auto engine = boot_v0();
  const Served v0 = served(*engine);
  const auto pointers = engine->storage_pointers();
  const auto report = engine->prepare(1);
  EXPECT_FALSE(report.already_prepared);
  const auto commit = engine->commit(1);
  ASSERT_TRUE(commit.pause_seconds.has_value());
  EXPECT_GE(commit.seconds, *commit.pause_seconds);
  const Served v1 = served(*engine);
  EXPECT_EQ(v1, native(1));
  EXPECT_NE(v1.fingerprint, v0.fingerprint);
  EXPECT_EQ(engine->storage_pointers(), pointers);
}

TEST_P(EngineUpdates, CatchUpFoldsThreeDeltas) {
  auto engine = boot_v0();
  engine->prepare(3);
  engine->commit(3);
  EXPECT_EQ(served(*engine), native(3));
}

TEST_P(EngineUpdates, SequentialUpdatesStayExact) {
  auto engine = boot_v0();
  for (uint32_t v = 1; v <= 3; ++v) {
    engine->prepare(v);
    engine->commit(v);
  }
  EXPECT_EQ(served(*engine), native(3));
}

TEST_P(EngineUpdates, StateMachineRulesAtTheEngine) {
  auto engine = boot_v0();
  EXPECT_THROW(engine->commit(1), Error);  // nothing prepared
  EXPECT_FALSE(engine->prepare(1).already_prepared);
  EXPECT_TRUE(engine->prepare(1).already_prepared);  // idempotent
  EXPECT_FALSE(engine->prepare(2).already_prepared);  // supersedes 1
  EXPECT_EQ(test::error_text([&] { engine->commit(1); }), "commit 000001: the prepared version is 000002");
  EXPECT_EQ(engine->weight_version(), 0u);
  engine->commit(2);
  EXPECT_EQ(served(*engine), native(2));
  expect_rejected(*engine, 1, {ErrorKind::State}, "not newer than the served version 000002");
}

TEST_P(EngineUpdates, MissingTargetIsRejectedAndChangesNothing) {
  auto engine = boot_v0();
  expect_rejected(*engine, 9, {ErrorKind::Missing}, "000009");
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, RejectedPrepareKeepsThePreparedVersion) {
  auto engine = boot_v0();
  engine->prepare(1);
  expect_rejected(*engine, 9, {ErrorKind::Missing}, "000009");
  engine->commit(1);  // version 1 is still prepared and intact
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, PrepareDuringCommitIsRefusedNeverMixed) {
  // A prepare that arrives while a commit copies the prepared artefacts must be refused: it would rebuild the
  // very images / checkpoint the commit is reading.
  Engine engine(EngineOptions{test::tiny_profile(), tp(), test::sync_of(std::get<0>(GetParam())), store(), dir_ / "work-race", 2});
  std::string refusal;
  engine.debug_set_inside_pause([&] {
    try {
      engine.prepare(2);
      refusal = "accepted";
    } catch (const Error& e) {
      refusal = e.what();
    }
  });
  engine.load_native(Store(store()).update_dir(0), 0);
  engine.prepare(1);
  engine.commit(1);
  EXPECT_EQ(refusal, "prepare 000002: a commit is in progress");
  EXPECT_EQ(served(engine), native(1));
  engine.prepare(2);  // and once the commit ended, the next update goes through
  engine.commit(2);
  EXPECT_EQ(served(engine), native(2));
}

TEST_P(EngineUpdates, DiskStateFromAnotherPublicationIsNotTrusted) {
  // Prepare v1, then re-create the store with another seed at the same path: a new engine on the same workdir
  // must not take the old materialized v1 for verified.
  {
    auto engine = boot(Store(store()).update_dir(0), 0);
    engine->prepare(1);
  }
  std::filesystem::remove_all(store());
  test::publish_tiny(store(), 3, kSeed + 1, std::get<1>(GetParam()));
  counter_ -= 1;  // reuse the previous engine's workdir
  auto engine = boot(Store(store()).update_dir(0), 0);
  engine->prepare(1);
  engine->commit(1);
  const auto dir = dir_ / "native-other-seed";
  write_full_checkpoint(test::tiny_profile(), kSeed + 1, 1, std::nullopt, dir);
  auto reference = boot(dir, 1);
  EXPECT_EQ(served(*engine), served(*reference));
}

/// Bad publications: each must fail prepare naming the tensor/field, change nothing, and a later good prepare
/// (after the publication is repaired) must succeed exactly.
class BadInput {
 public:
  BadInput(const std::filesystem::path& shard) : shard_(shard), backup_(shard.string() + ".orig") {
    std::filesystem::copy_file(shard_, backup_);
  }
  ~BadInput() { std::filesystem::rename(backup_, shard_); }

 private:
  std::filesystem::path shard_, backup_;
};

TEST_P(EngineUpdates, CorruptedPayloadByteIsCaught) {
  auto engine = boot_v0();
  const auto shard = test::shard_of(store(), 1, kTensor);
  {
    BadInput guard(shard);
    test::rewrite_shard(shard, [](auto& tensors, auto&) {
      for (auto& t : tensors) {
        if (t.spec.name == kTensor) t.bytes[t.bytes.size() / 2] ^= 0x40;
      }
    });
    // A flipped compressed byte either breaks the frame or yields another mask: both must be caught.
    expect_rejected(*engine, 1, {ErrorKind::Format, ErrorKind::Checksum}, kTensor);
  }
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, WrongChecksumIsCaughtBeforeAnythingLiveIsTouched) {
  auto engine = boot_v0();
  const auto shard = test::shard_of(store(), 1, kTensor);
  {
    BadInput guard(shard);
    test::rewrite_shard(shard, [](auto&, auto& metadata) {
      auto& hex = metadata.at(kTensor);
      hex[0] = hex[0] == '0' ? '1' : '0';
    });
    expect_rejected(*engine, 1, {ErrorKind::Checksum}, kTensor);
  }
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, TruncatedShardIsRetryable) {
  auto engine = boot_v0();
  const auto shard = test::shard_of(store(), 1, kTensor);
  {
    BadInput guard(shard);
    std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 3);
    const Served before = served(*engine);
    try {
      engine->prepare(1);
      ADD_FAILURE() << "prepare succeeded";
    } catch (const Error& e) {
      EXPECT_TRUE(e.retryable()) << e.what();
      EXPECT_NE(std::string(e.what()).find(shard.filename().string()), std::string::npos) << e.what();
    }
    EXPECT_EQ(served(*engine), before);
  }
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, DeltaWhoseBaseIsNotTheServedVersionIsRejected) {
  auto engine = boot_v0();
  const auto index_path = Store(store()).update_dir(1) / kIndexFileName;
  const auto original = read_checkpoint_index(index_path);
  auto edited = original;
  edited.metadata["base_version"] = "000002";
  write_checkpoint_index(index_path, edited);
  expect_rejected(*engine, 1, {ErrorKind::Lineage}, "000002");
  write_checkpoint_index(index_path, original);
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

TEST_P(EngineUpdates, MissingTensorIsNamed) {
  auto engine = boot_v0();
  const auto shard = test::shard_of(store(), 1, kTensor);
  const auto index_path = Store(store()).update_dir(1) / kIndexFileName;
  const auto original_index = read_checkpoint_index(index_path);
  {
    BadInput guard(shard);
    test::rewrite_shard(shard, [](auto& tensors, auto& metadata) {
      std::erase_if(tensors, [](const auto& t) { return t.spec.name == kTensor; });
      metadata.erase(kTensor);
    });
    auto index = original_index;
    index.weight_map.erase(kTensor);
    write_checkpoint_index(index_path, index);
    expect_rejected(*engine, 1, {ErrorKind::Missing}, kTensor);
    write_checkpoint_index(index_path, original_index);
  }
  engine->prepare(1);
  engine->commit(1);
  EXPECT_EQ(served(*engine), native(1));
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineUpdates,
                         ::testing::Values(std::make_tuple(std::string("disk"), DeltaEncoding::Xor, 2),
                                           std::make_tuple(std::string("cpu"), DeltaEncoding::Xor, 2),
                                           std::make_tuple(std::string("disk"), DeltaEncoding::Overwrite, 2),
                                           std::make_tuple(std::string("cpu"), DeltaEncoding::Overwrite, 2),
                                           std::make_tuple(std::string("refit"), DeltaEncoding::Xor, 2),
                                           std::make_tuple(std::string("refit"), DeltaEncoding::Overwrite, 2),
                                           std::make_tuple(std::string("cpu"), DeltaEncoding::Xor, 1),
                                           std::make_tuple(std::string("cpu"), DeltaEncoding::Overwrite, 1)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == DeltaEncoding::Xor ? "_xor" : "_overwrite") +
                                  (std::get<2>(info.param) == 2 ? "" : "_tp" + std::to_string(std::get<2>(info.param)));
                         });

}  // namespace
}  // namespace wsb
