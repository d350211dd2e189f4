// The canonical image's homes (modes/sync/canonical_image.hpp): a homed tensor is the caller's memory, its own
// buffer holds only the rest, loading writes through the homes, and a home of the wrong size, misaligned, or a
// homes list of another length is refused naming what is wrong; invalidate() makes the image unloaded.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "modes/sync/canonical_image.hpp"
#include "modes/sync/rank_image.hpp"
#include "publication/store.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

/// 64 B aligned caller memory for homes.
std::unique_ptr<uint8_t, AlignedFree> aligned_bytes(size_t n) {
  return std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
}

TEST(CanonicalImageHomes, AHomedTensorLivesInTheCallersMemoryAndLoadsThere) {
  const ModelProfile profile = test::tiny_profile();
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  const CanonicalImage plain(profile, "test");
  ASSERT_GE(tensors.size(), 2u);
  // Home the first and the last tensor.
  const size_t last = tensors.size() - 1;
  auto first_home = aligned_bytes(tensors[0].bytes());
  auto last_home = aligned_bytes(tensors[last].bytes());
  std::vector<std::span<uint8_t>> homes(tensors.size());
  homes[0] = {first_home.get(), tensors[0].bytes()};
  homes[last] = {last_home.get(), tensors[last].bytes()};
  CanonicalImage image(profile, "test", HostMemory::Private, homes);
  EXPECT_EQ(image.tensor(0).data(), first_home.get());
  EXPECT_EQ(image.tensor(last).data(), last_home.get());
  // The own buffer lays out the others as before, without the homed two.
  uint64_t own = 0;
  for (size_t i = 1; i < last; ++i) own = align_up(own, kStorageAlignment) + tensors[i].bytes();
  EXPECT_EQ(image.bytes(), own);
  EXPECT_LT(image.bytes(), plain.bytes());

  test::TempDir dir;
  test::publish_tiny(dir.path() / "store", 1);
  CheckpointReader v0(Store(dir.path() / "store").update_dir(0));
  PhaseLog log;
  image.load(v0, 0, log);
  EXPECT_TRUE(image.loaded());
  for (size_t i : {size_t{0}, last}) {
    const auto want = v0.data(tensors[i].name);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), image.tensor(i).begin(), image.tensor(i).end()))
        << tensors[i].name;
  }
  image.invalidate();
  EXPECT_FALSE(image.loaded());
  test::expect_error([&] { image.advance(dir.path() / "store", 1, 1, log, "prepare", {}); }, ErrorKind::State,
                     {"test: prepare before the engine's native load"});
}

TEST(CanonicalImageHomes, WrongHomesAreRefusedNamingTheTensor) {
  const ModelProfile profile = test::tiny_profile();
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  auto memory = aligned_bytes(tensors[0].bytes() + 64);
  std::vector<std::span<uint8_t>> homes(tensors.size());
  homes[0] = {memory.get(), tensors[0].bytes() - 1};
  test::expect_error([&] { CanonicalImage(profile, "cpu mode", HostMemory::Private, homes); }, ErrorKind::Mismatch,
                     {"cpu mode: tensor '" + tensors[0].name + "' (" + std::to_string(tensors[0].bytes()) + " B)",
                      "home of " + std::to_string(tensors[0].bytes() - 1) + " B"});
  homes[0] = {memory.get() + 8, tensors[0].bytes()};
  test::expect_error([&] { CanonicalImage(profile, "cpu mode", HostMemory::Private, homes); }, ErrorKind::Mismatch,
                     {"tensor '" + tensors[0].name + "'", "cannot live in a home"});
  homes.pop_back();
  test::expect_error([&] { CanonicalImage(profile, "cpu mode", HostMemory::Private, homes); }, ErrorKind::Mismatch,
                     {"cpu mode: " + std::to_string(tensors.size() - 1) + " tensor homes for " +
                      std::to_string(tensors.size()) + " canonical tensors"});
}

}  // namespace
}  // namespace wsb
