// copy_from_mapping (models/checkpoint): the copy is exact, and afterwards the tensor's pages are no longer in the
// process's resident set (the file mapping's Rss in /proc/self/smaps), while a plain copy leaves all of them; the
// pages shared with the neighbouring tensors stay; sizes that differ are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "models/checkpoint/mapped_copy.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/support/mapped_rss.hpp"

namespace wsb {
namespace {

struct MappedTensor {
  testutil::TempDir dir;
  std::filesystem::path path = dir / "model.safetensors";
  std::vector<uint8_t> big;
  std::unique_ptr<SafetensorsFile> file;

  MappedTensor() {
    // A 3-byte tensor first, so the big one starts inside a page it shares; an odd size, so it ends inside one.
    std::vector<uint8_t> head{1, 2, 3}, tail{4, 5, 6, 7};
    big.resize((size_t{8} << 20) + 123);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    const TensorData tensors[] = {{TensorSpec{"head", DType::U8, {3}}, head},
                                  {TensorSpec{"big", DType::U8, {static_cast<int64_t>(big.size())}}, big},
                                  {TensorSpec{"tail", DType::U8, {4}}, tail}};
    write_safetensors(path, tensors);
    file = std::make_unique<SafetensorsFile>(path);
  }
  std::span<const uint8_t> data(const char* name) const { return file->data(file->at(name)); }
};

TEST(MappedCopy, CopiesExactlyAndLeavesOnlyTheSharedPagesResident) {
  MappedTensor t;
  const uint64_t before = test::mapped_rss(t.path);
  std::vector<uint8_t> out(t.big.size(), 0xEE);
  copy_from_mapping(t.data("big"), out, size_t{1} << 20);
  EXPECT_EQ(out, t.big);
  // The two pages the big tensor shares with its neighbours (and whatever the header read mapped) may stay.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_LE(test::mapped_rss(t.path), before + 2 * page);
  // The neighbours' bytes are intact and still readable.
  EXPECT_EQ(t.data("head")[2], 3);
  EXPECT_EQ(t.data("tail")[0], 4);
}

TEST(MappedCopy, APlainCopyKeepsEveryPageResident) {
  // The measure above can see the difference: without the release the whole tensor stays in the resident set.
  MappedTensor t;
  const auto src = t.data("big");
  std::vector<uint8_t> out(src.begin(), src.end());
  EXPECT_EQ(out, t.big);
  EXPECT_GE(test::mapped_rss(t.path), uint64_t{8} << 20);
}

TEST(MappedCopy, DifferentSizesAreRefused) {
  MappedTensor t;
  std::vector<uint8_t> out(10);
  test::expect_error([&] { copy_from_mapping(t.data("big"), out); }, ErrorKind::Mismatch,
                     {"copy out of a mapping", "10 destination bytes"});
}

}  // namespace
}  // namespace wsb
