// Disk-mode commits on the CUDA backend swizzle NVFP4 block scales on the device, from their gathered shards
// straight into the live storages (engine/device_transform_target.hpp), while the native load keeps the host
// transform: after v0 -> v1 -> v3 reloads into the same, now dirty, storages, every rank's checksums and the probe
// fingerprint equal those of a fresh engine natively loaded from the publisher's FULL checkpoint, no storage
// moved, and the commit's phases show the device path carried exactly the gathered scale bytes. GPU only.
#include <gtest/gtest.h>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/transform/nvfp4.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;
const std::string kProfile = "kimi-tiny-nvfp4";

using test::Served;

class DeviceTransformCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
    test::publish_tiny(store(), 3, kSeed, DeltaEncoding::Xor, kProfile);
  }
  std::filesystem::path store() const { return dir_ / "store"; }
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version) {
    EngineOptions options{test::tiny_profile(kProfile), 2, test::sync_of("disk"), store(), dir_ / ("work" + std::to_string(n_++)), 2};
    options.backend = "cuda";
    auto engine = std::make_unique<Engine>(options);
    engine->load_native(checkpoint, version);
    return engine;
  }
  Served served(Engine& e) { return test::served(e, "device transform probe"); }
  Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    write_full_checkpoint(test::tiny_profile(kProfile), kSeed, version, std::nullopt, dir);
    return served(*boot(dir, version));
  }
  static uint64_t phase_bytes(const CommitReport& report, const std::string& name) {
    uint64_t bytes = 0;
    for (const auto& p : report.phases) bytes += p.name == name ? p.bytes : 0;
    return bytes;
  }

  test::TempDir dir_;
  int n_ = 0;
};

TEST_F(DeviceTransformCommit, ReloadsEqualNativeLoadsOfTheHostTransform) {
  uint64_t scale_bytes = 0;  // gathered bytes of every NVFP4 scale storage, both ranks
  for (const auto& layout : build_rank_layouts(test::tiny_profile(kProfile), 2)) {
    for (const auto& spec : layout.storages) scale_bytes += spec.transform == kNvfp4ScaleSwizzle ? spec.gathered_bytes() : 0;
  }
  ASSERT_GT(scale_bytes, 0u);

  auto engine = boot(Store(store()).update_dir(0), 0);
  const auto pointers = engine->storage_pointers();
  for (uint32_t target : {1u, 3u}) {
    SCOPED_TRACE(target);
    engine->prepare(target);
    const CommitReport report = engine->commit(target);
    EXPECT_EQ(phase_bytes(report, "commit.device_transform"), scale_bytes);
    const Served now = served(*engine);
    EXPECT_EQ(now.version, target);
    EXPECT_EQ(now, native(target));
  }
  EXPECT_EQ(engine->storage_pointers(), pointers);
}

}  // namespace
}  // namespace wsb
