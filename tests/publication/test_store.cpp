// Store: version strings, the `latest` pointer (atomic, forward only) and publication discovery.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "models/checkpoint/checkpoint.hpp"
#include "core/errors.hpp"
#include "publication/store.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using test::TempDir;
using test::expect_error;

namespace fs = std::filesystem;



std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(Store, VersionStrings) {
  EXPECT_EQ(version_string(0), "000000");
  EXPECT_EQ(version_string(3), "000003");
  EXPECT_EQ(version_string(999999), "999999");
  expect_error([] { version_string(1000000); }, ErrorKind::Format, {"1000000", "six digits"});
  EXPECT_EQ(parse_version_string("000042", "f"), 42u);
  EXPECT_EQ(parse_version_string("999999", "f"), 999999u);
  for (std::string bad : {"42", "0000042", "00004a", "", " 00042", "-00001"}) {
    expect_error([&] { parse_version_string(bad, "index.json metadata 'version'"); }, ErrorKind::Format,
                 {"index.json metadata 'version'", "expected a 6-digit version, got '" + bad + "'"});
  }
}

TEST(Store, Paths) {
  Store store("/some/store");
  EXPECT_EQ(store.root(), fs::path("/some/store"));
  EXPECT_EQ(store.update_dir(5), fs::path("/some/store/updates/weight_v000005"));
}

TEST(Store, LatestForwardOnly) {
  TempDir tmp;
  Store store(tmp.path() / "store");
  EXPECT_EQ(store.latest(), std::nullopt);
  store.advance_latest(2);
  EXPECT_EQ(read_file(tmp.path() / "store" / "latest"), "000002\n");
  EXPECT_EQ(store.latest(), 2u);
  store.advance_latest(2);  // equal: no-op
  EXPECT_EQ(store.latest(), 2u);
  store.advance_latest(5);
  EXPECT_EQ(read_file(tmp.path() / "store" / "latest"), "000005\n");
  expect_error([&] { store.advance_latest(3); }, ErrorKind::Lineage,
               {(tmp.path() / "store" / "latest").string(), "from 000005 to 000003", "forward only"});
  EXPECT_EQ(read_file(tmp.path() / "store" / "latest"), "000005\n");
  // Nothing but the pointer (and its lock file) is left behind: the temp file was renamed, not copied.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path() / "store")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".latest.lock", "latest"}));
}

TEST(Store, LatestUnparsable) {
  TempDir tmp;
  Store store(tmp.path());
  write_file(tmp.path() / "latest", "12\n");
  expect_error([&] { store.latest(); }, ErrorKind::Format,
               {(tmp.path() / "latest").string(), "expected a 6-digit version, got '12'"});
  write_file(tmp.path() / "latest", "000007\n\n");
  expect_error([&] { store.latest(); }, ErrorKind::Format, {(tmp.path() / "latest").string()});
  write_file(tmp.path() / "latest", "000007");  // hand edit without the newline
  EXPECT_EQ(store.latest(), 7u);
  expect_error([&] { store.advance_latest(6); }, ErrorKind::Lineage, {"from 000007 to 000006"});
}

TEST(Store, ReadersNeverSeeAPartialPointer) {
  TempDir tmp;
  Store store(tmp.path());
  store.advance_latest(0);
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::string failure;
  std::thread reader([&] {
    uint32_t last = 0;
    while (!done.load()) {
      try {
        std::optional<uint32_t> v = Store(tmp.path()).latest();
        if (!v || *v < last) failure = "pointer absent or moved back";
        if (v) last = *v;
        ++reads;
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
  });
  for (uint32_t v = 1; v <= 30; ++v) store.advance_latest(v);  // each one fsyncs: keep it short
  done = true;
  reader.join();
  EXPECT_EQ(failure, "");
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(store.latest(), 30u);
}

TEST(Store, VersionsListsOnlyCompletePublications) {
  TempDir tmp;
  Store store(tmp.path());
  EXPECT_TRUE(store.versions().empty());
  write_file(store.update_dir(1) / kIndexFileName, "{}");
  write_file(store.update_dir(3) / kIndexFileName, "{}");
  fs::create_directories(store.update_dir(2));  // no index: not published (yet)
  write_file(tmp.path() / "updates" / ".weight_v000004.tmp-1-0" / kIndexFileName, "{}");
  write_file(tmp.path() / "updates" / "weight_vabcdef" / kIndexFileName, "{}");
  write_file(tmp.path() / "updates" / "weight_v0000010" / kIndexFileName, "{}");
  EXPECT_EQ(store.versions(), (std::vector<uint32_t>{1, 3}));
  EXPECT_TRUE(store.has(1));
  EXPECT_FALSE(store.has(2));
  EXPECT_FALSE(store.has(4));
}

}  // namespace
}  // namespace wsb
