// `wsbench publish --versions`: "N" means what a matrix's publish_versions N means (FULL v0 and DELTA v1..vN);
// "A..B" appends or starts a range.
#include <gtest/gtest.h>

#include "cli/commands.hpp"
#include "publication/publication.hpp"
#include "publication/store.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

PublishArgs args_for(const std::filesystem::path& store, const std::string& versions) {
  PublishArgs a;
  a.model = "llama-tiny-bf16";
  a.store = store;
  a.versions = versions;
  a.seed = 7;
  return a;
}

TEST(CliPublish, SingleNumberPublishesZeroThroughN) {
  test::TempDir dir;
  EXPECT_EQ(cmd_publish(WSBENCH_PROFILES_DIR, args_for(dir / "store", "2")), 0);
  const Store store(dir / "store");
  EXPECT_TRUE(store.has(0));
  EXPECT_TRUE(store.has(1));
  EXPECT_TRUE(store.has(2));
  EXPECT_FALSE(store.has(3));
  EXPECT_EQ(store.latest(), 2u);
  // A range appends: 3..3 is the single next version.
  EXPECT_EQ(cmd_publish(WSBENCH_PROFILES_DIR, args_for(dir / "store", "3..3")), 0);
  EXPECT_EQ(Store(dir / "store").latest(), 3u);
}

TEST(CliPublish, BadVersionsAreNamed) {
  test::TempDir dir;
  test::expect_error([&] { cmd_publish(WSBENCH_PROFILES_DIR, args_for(dir / "store", "x")); }, ErrorKind::Format,
                     {"--versions: 'x' is not a version number (N)"});
  test::expect_error([&] { cmd_publish(WSBENCH_PROFILES_DIR, args_for(dir / "store", "3..1")); }, ErrorKind::Format,
                     {"--versions 3..1: last version before first"});
}

// The publish command and a matrix cell accept the same frame sizes (publisher's frame_bytes_problem), and the
// refusal names the flag before anything is written.
TEST(CliPublish, FrameBytesOtherThanZeroOrAMultipleOf4096AreRefused) {
  test::TempDir dir;
  PublishArgs a = args_for(dir / "store", "1");
  a.frame_bytes = 1000;
  test::expect_error([&] { cmd_publish(WSBENCH_PROFILES_DIR, a); }, ErrorKind::Format,
                     {"--frame-bytes must be 0 (one zstd frame per payload) or a multiple of 4096, got 1000"});
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
  a.frame_bytes = 8192;
  EXPECT_EQ(cmd_publish(WSBENCH_PROFILES_DIR, a), 0);
  EXPECT_TRUE(Store(dir / "store").has(1));
}

TEST(CliPublish, ChecksumRangeBytesSelectTheRangedFormatForDeltasOnly) {
  test::TempDir dir;
  PublishArgs a = args_for(dir / "store", "1");
  a.checksum_range_bytes = 4096;
  test::expect_error([&] { cmd_publish(WSBENCH_PROFILES_DIR, a); }, ErrorKind::Format,
                     {"--checksum-range-bytes must be 0 (one xxh3-128 per tensor) or a multiple of 1 MiB (1048576), "
                      "got 4096"});
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
  a.checksum_range_bytes = 1 << 20;
  EXPECT_EQ(cmd_publish(WSBENCH_PROFILES_DIR, a), 0);
  const Store store(dir / "store");
  EXPECT_EQ(Publication(store, 0).manifest().checksum_range_bytes, 0u);  // FULL v0 keeps the fork's format
  const Publication v1(store, 1);
  EXPECT_EQ(v1.manifest().checksum_format, "xxh3-128-ranges");
  EXPECT_EQ(v1.manifest().checksum_range_bytes, 1u << 20);
}

}  // namespace
}  // namespace wsb
