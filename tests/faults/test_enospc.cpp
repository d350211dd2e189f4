// ENOSPC during disk-mode materialization: the mode's workdir lives on a small tmpfs this test mounts, filled so the
// mutable checkpoint does not fit. The prepare fails before it folds anything, with an error naming the file and the
// bytes it needed, the engine goes on serving v0 exactly as before, nothing is left behind, and once space is freed a
// later prepare + commit equals a native load.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "publisher/publisher.hpp"
#include "modes/disk/disk_mode.hpp"
#include "tests/support/served.hpp"
#include "tests/support/small_fs.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 11;
constexpr uint64_t kPage = 4096;
const char* const kPrompt = "enospc";

uint64_t pages(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

uint64_t dir_bytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += pages(e.file_size());
  }
  return total;
}

class Enospc : public ::testing::TestWithParam<std::string> {};

TEST_P(Enospc, FullDiskFailsPrepareNamingTheFileAndBytesAndChangesNothing) {
  test::TempDir dir;
  const ModelProfile profile = test::tiny_profile(GetParam());
  const fs::path store = dir / "store";
  test::publish_tiny(store, 1, kSeed, DeltaEncoding::Xor, profile.id);
  const fs::path full0 = Store(store).update_dir(0);
  const std::string shard = "model-00001-of-00001.safetensors";
  ASSERT_TRUE(fs::exists(full0 / shard)) << "the tiny preset's FULL v0 is one shard";
  const uint64_t shard_bytes = fs::file_size(full0 / shard);
  // Room for the whole checkpoint twice over, so that after the filler is removed the seed fits with space to spare.
  const uint64_t checkpoint = dir_bytes(full0);
  std::string why_not;
  auto small = test::SmallFs::mount(dir / "small", 2 * checkpoint + 16 * kPage, why_not);
  if (!small) GTEST_SKIP() << "no small filesystem for the ENOSPC case: " << why_not;
  const fs::path workdir = small->dir() / "work";
  fs::create_directories(workdir);

  Engine engine(EngineOptions{profile, 2, test::sync_of("disk"), store, workdir, 2});
  engine.load_native(full0, 0);
  const test::Served before = test::served(engine, kPrompt);
  const auto pointers = engine.storage_pointers();

  // Half of the shard fits: reserving the new checkpoint's shard (same layout as the FULL's, the target's checksums
  // in its header) runs out of space.
  const uint64_t leave = pages(shard_bytes / 2);
  const fs::path filler = small->fill("other-tenant.bin", leave);
  ASSERT_EQ(small->free_bytes(), leave);
  EXPECT_EQ(test::error_message([&] { engine.prepare(1); }, ErrorKind::Resource),
            fmt::format("reserve {}: No space left on device for {} bytes",
                        (workdir / "checkpoint.next" / shard).string(), shard_bytes));
  EXPECT_FALSE(fs::exists(workdir / "checkpoint.next"));  // nothing half-written is left to take space
  EXPECT_EQ(small->free_bytes(), leave);
  EXPECT_TRUE(engine.healthy());
  EXPECT_EQ(test::served(engine, kPrompt), before);
  EXPECT_EQ(engine.storage_pointers(), pointers);
  test::expect_error([&] { engine.commit(1); }, ErrorKind::State, {"commit 000001: nothing is prepared"});
  // What is left on the disk is unverified: no state file claims it.
  const auto& disk = dynamic_cast<const DiskMode&>(engine.mode());
  EXPECT_FALSE(disk.read_state().has_value());
  EXPECT_FALSE(fs::exists(disk.checkpoint_dir() / ".weight_sync" / "state.json"));

  fs::remove(filler);
  engine.prepare(1);
  engine.commit(1);
  const fs::path full1 = dir / "native1";
  write_full_checkpoint(profile, kSeed, 1, std::nullopt, full1);
  Engine native(EngineOptions{profile, 2, test::sync_of("disk"), store, dir / "native-work", 2});
  native.load_native(full1, 1);
  const test::Served reference = test::served(native, kPrompt);
  EXPECT_EQ(test::served(engine, kPrompt), reference);
  EXPECT_NE(reference.checksums, before.checksums);
  ASSERT_TRUE(disk.read_state().has_value());
  EXPECT_EQ(disk.read_state()->version, 1u);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Enospc, ::testing::Values(std::string("llama-tiny-bf16"), std::string("kimi-tiny-nvfp4")),
                         test::StringParamName());

}  // namespace
}  // namespace wsb
