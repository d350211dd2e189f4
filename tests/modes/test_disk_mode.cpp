// Disk mode's prepare on its own (no engine): one streaming pass from the newest base into a new checkpoint that
// replaces the verified one only once complete. The base is the store's FULL at the first update, the mode's own
// checkpoint from then on (no reseed), a natively loaded checkpoint outside the store when it is newer, and the FULL
// seed again when that checkpoint is not what it claims. A failed prepare leaves the verified checkpoint as it was.
// The checkpoint a swap replaces is removed after the commit, off the prepare and the pause.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "core/checksum.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/disk/disk_mode.hpp"
#include "modes/sync/storage_target.hpp"
#include "publication/publication.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using Tensors = std::map<std::string, std::vector<uint8_t>>;

constexpr uint64_t kSeed = 21;

Tensors tensors_of(const fs::path& dir) {
  CheckpointReader reader(dir);
  Tensors out;
  for (const auto& name : reader.tensor_names()) {
    const auto bytes = reader.data(name);
    out[name] = {bytes.begin(), bytes.end()};
  }
  return out;
}

std::vector<std::string> phase_names(const PhaseLog& log) {
  std::vector<std::string> names;
  for (const auto& r : log.records()) names.push_back(r.name);
  return names;
}

class DiskModePrepare : public ::testing::Test {
 protected:
  void SetUp() override { test::publish_tiny(store(), 3, kSeed); }
  fs::path store() const { return dir_ / "store"; }
  std::unique_ptr<DiskMode> mode(const std::string& work = "work") {
    SyncContext context{profile_, build_rank_layouts(profile_, 2), store(), dir_ / work, 2};
    context.sync = test::sync_of("disk");
    return std::make_unique<DiskMode>(std::move(context));
  }
  /// The publisher's FULL checkpoint of `version` (what every prepare must write), made once.
  const Tensors& native(uint32_t version, uint64_t seed = kSeed) {
    const fs::path path = native_dir(version, seed);
    auto [it, fresh] = native_.try_emplace({version, seed});
    if (fresh) it->second = tensors_of(path);
    return it->second;
  }
  fs::path native_dir(uint32_t version, uint64_t seed = kSeed) {
    const fs::path path = dir_ / fmt::format("native-v{}-s{}", version, seed);
    if (!fs::exists(path)) write_full_checkpoint(profile_, seed, version, std::nullopt, path);
    return path;
  }
  void boot(DiskMode& m, const fs::path& checkpoint, uint32_t version) {
    PhaseLog log;
    m.on_native_load(CheckpointReader(checkpoint), version, log);
  }
  uint64_t canonical_bytes() const { return profile_.canonical_bytes(); }

  test::TempDir dir_;
  ModelProfile profile_ = test::tiny_profile();
  std::map<std::pair<uint32_t, uint64_t>, Tensors> native_;
};

TEST_F(DiskModePrepare, FirstUpdateIsOnePassFromTheFullTheEngineLoaded) {
  auto m = mode();
  boot(*m, Store(store()).update_dir(0), 0);
  PhaseLog log;
  m->prepare(0, 1, log);
  EXPECT_EQ(m->prepared_version(), 1u);
  ASSERT_TRUE(m->last_base().has_value());
  EXPECT_EQ(m->last_base()->kind, DiskBase::Kind::Full);  // the native load is the store's own FULL v0
  EXPECT_EQ(m->last_base()->version, 0u);
  EXPECT_EQ(phase_names(log), (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  const auto records = log.records();
  EXPECT_EQ(records[1].bytes, canonical_bytes());
  EXPECT_EQ(records[1].floor, Floor::DiskReadWrite);
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(1));
  const auto state = m->read_state();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->version, 1u);
  EXPECT_EQ(state->seeded_from, 0u);
  EXPECT_FALSE(fs::exists(dir_ / "work" / "checkpoint.next"));
  EXPECT_FALSE(fs::exists(dir_ / "work" / "checkpoint.old"));
  // Every shard names its tensors' target checksums; the index maps exactly the canonical tensors.
  CheckpointReader written(m->checkpoint_dir());
  for (const auto& [name, bytes] : native(1)) {
    EXPECT_EQ(written.shard_of(name).metadata().at(name), xxh3_128_hex(bytes)) << name;
  }
  EXPECT_EQ(written.index().weight_map.size(), profile_.canonical_tensors().size());
  EXPECT_EQ(written.index().total_size, canonical_bytes());
}

TEST_F(DiskModePrepare, LaterUpdatesReadTheMaterializedCheckpointNeverTheFull) {
  auto m = mode();
  boot(*m, Store(store()).update_dir(0), 0);
  PhaseLog first;
  m->prepare(0, 1, first);
  PhaseLog second;
  m->prepare(1, 2, second);
  ASSERT_TRUE(m->last_base().has_value());
  EXPECT_EQ(m->last_base()->kind, DiskBase::Kind::Local);
  EXPECT_EQ(m->last_base()->version, 1u);
  EXPECT_EQ(m->last_base()->dir, m->checkpoint_dir());
  EXPECT_EQ(phase_names(second), (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  EXPECT_EQ(m->read_state()->version, 2u);
  EXPECT_EQ(m->read_state()->seeded_from, 0u);
  // A mode built anew on the same workdir (a restarted engine) trusts the state and goes on from it.
  auto again = mode();
  boot(*again, Store(store()).update_dir(0), 0);
  PhaseLog third;
  again->prepare(2, 3, third);
  EXPECT_EQ(again->last_base()->kind, DiskBase::Kind::Local);
  EXPECT_EQ(again->last_base()->version, 2u);
  EXPECT_EQ(tensors_of(again->checkpoint_dir()), native(3));
}

TEST_F(DiskModePrepare, CatchUpFoldsEveryDeltaInTheOnePass) {
  auto m = mode();
  boot(*m, Store(store()).update_dir(0), 0);
  PhaseLog log;
  m->prepare(0, 3, log);
  EXPECT_EQ(phase_names(log), (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(3));
  EXPECT_EQ(m->read_state()->version, 3u);
}

TEST_F(DiskModePrepare, FramedPublicationsWithRangedChecksumsFoldInTheOnePass) {
  // "zstd-frames" payloads (4 KiB of mask per frame: every large tensor spans several) with "xxh3-128-ranges"
  // checksums, xor and overwrite: a first update and a catch-up on the materialized checkpoint.
  for (DeltaEncoding encoding : {DeltaEncoding::Xor, DeltaEncoding::Overwrite}) {
    const std::string name(delta_encoding_name(encoding));
    PublishOptions options;
    options.store = dir_ / ("framed-" + name);
    options.first_version = 0;
    options.last_version = 3;
    options.seed = kSeed;
    options.encoding = encoding;
    options.frame_bytes = 4096;
    options.checksum_range_bytes = 1 << 20;
    publish(profile_, options);
    const Publication v1(Store(options.store), 1);
    ASSERT_EQ(v1.manifest().framing, PayloadFraming::Frames) << name;
    SyncContext context{profile_, build_rank_layouts(profile_, 2), options.store, dir_ / ("work-" + name), 2};
    context.sync = test::sync_of("disk");
    DiskMode m(std::move(context));
    boot(m, Store(options.store).update_dir(0), 0);
    PhaseLog first;
    m.prepare(0, 1, first);
    EXPECT_EQ(tensors_of(m.checkpoint_dir()), native(1)) << name;
    PhaseLog catch_up;
    m.prepare(1, 3, catch_up);
    EXPECT_EQ(m.last_base()->kind, DiskBase::Kind::Local) << name;
    EXPECT_EQ(tensors_of(m.checkpoint_dir()), native(3)) << name;
  }
}

TEST_F(DiskModePrepare, ANativeCheckpointOutsideTheStoreIsTheBaseWhenNewest) {
  auto m = mode();
  boot(*m, native_dir(1), 1);
  PhaseLog log;
  m->prepare(1, 2, log);
  ASSERT_TRUE(m->last_base().has_value());
  EXPECT_EQ(m->last_base()->kind, DiskBase::Kind::Native);
  EXPECT_EQ(m->last_base()->version, 1u);
  EXPECT_EQ(m->last_base()->dir, fs::absolute(native_dir(1)).lexically_normal());
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  EXPECT_EQ(m->read_state()->seeded_from, 1u);
}

TEST_F(DiskModePrepare, ANativeCheckpointThatIsNotItsVersionFallsBackToTheFullSeed) {
  auto m = mode();
  boot(*m, native_dir(1, kSeed + 1), 1);  // claims version 1 of this store, holds another run's weights
  PhaseLog log;
  m->prepare(1, 2, log);
  ASSERT_TRUE(m->last_base().has_value());
  EXPECT_EQ(m->last_base()->kind, DiskBase::Kind::Full);
  EXPECT_EQ(m->last_base()->version, 0u);
  EXPECT_EQ(phase_names(log), (std::vector<std::string>{"prepare.plan", "prepare.materialize",
                                                        "prepare.materialize", "prepare.swap"}));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  EXPECT_EQ(m->read_state()->seeded_from, 0u);
}

TEST_F(DiskModePrepare, AFailedPrepareLeavesTheVerifiedCheckpointAndItsState) {
  auto m = mode();
  boot(*m, Store(store()).update_dir(0), 0);
  PhaseLog log;
  m->prepare(0, 1, log);
  const std::string tensor = "model.layers.1.mlp.down_proj.weight";
  const fs::path shard = test::shard_of(store(), 2, tensor);
  fs::copy_file(shard, dir_ / "pristine.safetensors");
  const std::string fake(32, 'b');
  test::rewrite_shard(shard, [&](auto&, auto& metadata) { metadata.at(tensor) = fake; });
  EXPECT_EQ(test::error_message([&] { m->prepare(1, 2, log); }, ErrorKind::Checksum),
            fmt::format("tensor '{}': xxh3-128 of version 000002 is {}, publication says {}", tensor,
                        xxh3_128_hex(native(2).at(tensor)), fake));
  EXPECT_FALSE(m->prepared_version().has_value());  // superseded by the failed target
  EXPECT_EQ(m->read_state()->version, 1u);
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(1));
  EXPECT_FALSE(fs::exists(dir_ / "work" / "checkpoint.next"));
  fs::rename(dir_ / "pristine.safetensors", shard);
  m->prepare(1, 2, log);
  EXPECT_EQ(m->last_base()->kind, DiskBase::Kind::Local);
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
}

TEST_F(DiskModePrepare, LeftoversOfACrashedPrepareAreRemovedNeverTrusted) {
  auto m = mode();
  fs::create_directories(dir_ / "work" / "checkpoint.next");
  fs::create_directories(dir_ / "work" / "checkpoint.old");
  test::publish_tiny(dir_ / "junk", 1, kSeed + 3);
  fs::copy(Store(dir_ / "junk").update_dir(1), dir_ / "work" / "checkpoint.next", fs::copy_options::recursive);
  boot(*m, Store(store()).update_dir(0), 0);
  PhaseLog log;
  m->prepare(0, 2, log);
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  EXPECT_FALSE(fs::exists(dir_ / "work" / "checkpoint.next"));
  EXPECT_FALSE(fs::exists(dir_ / "work" / "checkpoint.old"));
}

/// Live storages that take every write and keep none: the reload's bytes are not what these tests look at.
class DiscardingTarget final : public StorageTarget {
 public:
  int tp() const override { return 2; }
  void write(int, size_t, uint64_t, std::span<const uint8_t>) override {}
  void synchronize() override {}
  Floor copy_floor() const override { return Floor::HostMemcpy; }
};

TEST_F(DiskModePrepare, TheReplacedCheckpointIsRemovedAfterTheCommitNotInThePrepare) {
  auto m = mode();
  boot(*m, Store(store()).update_dir(0), 0);
  DiscardingTarget live;
  PhaseLog first;
  m->prepare(0, 1, first);
  m->commit(live, first);
  m->finish_retiring();
  const fs::path old = dir_ / "work" / "checkpoint.old";
  EXPECT_FALSE(fs::exists(old));  // the first update replaced no checkpoint
  PhaseLog second;
  m->prepare(1, 2, second);
  EXPECT_EQ(phase_names(second), (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  // The replaced v1 waits for the commit, without a state file: no prepare can take it for a base.
  EXPECT_EQ(tensors_of(old), native(1));
  EXPECT_FALSE(fs::exists(old / ".weight_sync" / "state.json"));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  PhaseLog commit;
  m->commit(live, commit);
  static_cast<SyncMode&>(*m).settle();  // what an engine's settle() calls
  EXPECT_FALSE(fs::exists(old));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(2));
  EXPECT_EQ(m->read_state()->version, 2u);
  // The removal is over: the next prepare has nothing to wait for.
  PhaseLog third;
  m->prepare(2, 3, third);
  EXPECT_EQ(phase_names(third), (std::vector<std::string>{"prepare.plan", "prepare.materialize", "prepare.swap"}));
  EXPECT_EQ(tensors_of(m->checkpoint_dir()), native(3));
}

}  // namespace
}  // namespace wsb
