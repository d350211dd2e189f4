// The device-delta commit strategy (modes/cpu/device_delta_commit.hpp) against a host-memory live target: prepares
// whose writes go through the recorder stage only what changed and the commit leaves every storage equal to the
// images; a storage that some write reached without the recorder is copied in full (and staged again next time);
// live bytes that differ from what the images held, a staged pack corrupted before the pause, and a prepare that
// could not record (the images no longer held the live bytes) all end in a full copy that is still exact.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/cpu/device_delta_commit.hpp"
#include "modes/sync/staged_delta.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;

/// Live storages in host memory with one staging area, as the CPU backend has them.
class HostTarget final : public StorageTarget {
 public:
  explicit HostTarget(const std::vector<uint64_t>& sizes) {
    for (uint64_t n : sizes) live.emplace_back(n);
  }
  int tp() const override { return 1; }
  void write(int, size_t index, uint64_t offset, std::span<const uint8_t> src) override {
    std::memcpy(live.at(index).data() + offset, src.data(), src.size());
    written += src.size();
  }
  void synchronize() override {}
  Floor copy_floor() const override { return Floor::HostMemcpy; }
  uint64_t delta_staging_bytes(int) const override { return 64 << 20; }
  uint64_t delta_address(int, size_t index) const override { return reinterpret_cast<uintptr_t>(live[index].data()); }
  uint64_t live_digest(int, size_t index) override { return digest64(live.at(index)); }
  void reserve_delta_staging() override { ++reserved; }
  void stage_packs(std::span<const StagedPack> packs) override {
    reserved_at_stage.push_back(reserved);
    pack.clear();
    for (const StagedPack& p : packs) pack.assign(p.bytes.begin(), p.bytes.end());
    digest = packs.empty() ? 0 : packs[0].digest;
  }
  bool staged_deltas_intact() override { return pack.empty() || digest64(pack) == digest; }
  void apply_staged_deltas() override {
    if (!pack.empty()) apply_pack_on_host(pack);
  }

  std::vector<Bytes> live;
  Bytes pack;
  uint64_t digest = 0;
  uint64_t written = 0;
  int reserved = 0;                   ///< reserve_delta_staging calls so far
  std::vector<int> reserved_at_stage;  ///< `reserved` at each stage_packs
};

class DeviceDeltaStrategy : public ::testing::Test {
 protected:
  // Word-addressable storages of several sizes, one that is not (1001 bytes), one tiny.
  const std::vector<uint64_t> sizes_{64 << 10, 4100, 1001, 8192, 12};

  DeviceDeltaStrategy() : target_(sizes_) {
    RankLayout layout;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      RuntimeStorageSpec spec;
      spec.name = "s" + std::to_string(i);
      spec.dtype = DType::U8;
      spec.shape = {static_cast<int64_t>(sizes_[i])};
      spec.gathered_shape = spec.shape;
      layout.storages.push_back(spec);
    }
    context_.layouts = {layout};
    context_.threads = 2;
    context_.live = &target_;
    images_.emplace_back(layout);
    for (size_t i = 0; i < sizes_.size(); ++i) {
      auto image = images_[0].storage(i);
      for (auto& b : image) b = static_cast<uint8_t>(rng_());
      target_.live[i].assign(image.begin(), image.end());
    }
    strategy_ = std::make_unique<DeviceDeltaCommit>(context_, images_);
    strategy_->on_native_load(true, log_);
  }

  /// Target bytes of storage i: the current image with about `density` of its bytes changed.
  Bytes next_bytes(size_t i, double density) {
    auto image = images_[0].storage(i);
    Bytes out(image.begin(), image.end());
    std::bernoulli_distribution flip(density);
    for (auto& b : out) {
      if (flip(rng_)) b ^= static_cast<uint8_t>(1 + rng_() % 255);
    }
    return out;
  }

  /// One prepare: every storage gets `density` of its bytes changed, written through the recorder in 300-byte
  /// ranges, except the first half of storage `bypass` (written straight into the image when given).
  void prepare(double density, std::optional<size_t> bypass = std::nullopt) {
    DeltaRecorder* recorder = strategy_->begin_writes(log_);
    for (size_t i = 0; i < sizes_.size(); ++i) {
      // Storage 3 never changes; the tiny storage 4 always does.
      const Bytes next = next_bytes(i, i == 3 ? 0.0 : i == 4 ? 1.0 : density);
      if (recorder == nullptr) {
        std::memcpy(images_[0].storage(i).data(), next.data(), next.size());
        continue;
      }
      uint64_t at = 0;
      if (bypass == i) {
        at = next.size() / 2;
        std::memcpy(images_[0].storage(i).data(), next.data(), at);
      }
      for (; at < next.size(); at += 300) {
        recorder->copy(i, at, std::span<const uint8_t>(next).subspan(at, std::min<uint64_t>(300, next.size() - at)));
      }
    }
    strategy_->finish_writes(log_);
  }

  /// Commits and checks every live storage now equals its image; returns the bytes copied in full.
  uint64_t commit() {
    target_.written = 0;
    strategy_->preflight();
    strategy_->commit(target_, log_);
    for (size_t i = 0; i < sizes_.size(); ++i) {
      auto image = images_[0].storage(i);
      EXPECT_EQ(target_.live[i], Bytes(image.begin(), image.end())) << "storage " << i;
    }
    return target_.written;
  }

  std::mt19937_64 rng_{17};
  HostTarget target_;
  SyncContext context_;
  std::vector<RankImage> images_;
  PhaseLog log_;
  std::unique_ptr<DeviceDeltaCommit> strategy_;
};

TEST_F(DeviceDeltaStrategy, StagesOnlyWhatChanged) {
  for (int update = 0; update < 3; ++update) {
    SCOPED_TRACE(update);
    log_.clear();
    prepare(0.01);
    // Staged: storages 0 and 1 (sparse), 3 (unchanged); copied: 2 (not word-addressable) and 4 (tiny: any change
    // is dense).
    EXPECT_EQ(strategy_->staged(), (std::vector<bool>{true, true, false, true, false}));
    EXPECT_GT(log_.bytes("prepare.delta_upload"), 0u);
    EXPECT_EQ(log_.bytes("prepare.delta_digest"), 0u);
    EXPECT_EQ(commit(), 1001u + 12u);
  }
}

TEST_F(DeviceDeltaStrategy, TheStagingAreaIsReservedAtTheNativeLoadNotInTheFirstUpload) {
  // An engine's first prepare.delta_upload must time the upload alone: the area is allocated by the native load
  // (phase load.delta_staging), once per native load, before any pack is staged.
  EXPECT_EQ(target_.reserved, 1);
  std::vector<std::string> names;
  for (const PhaseRecord& r : log_.records()) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"load.delta_staging", "load.delta_digest"}));
  log_.clear();
  for (int update = 0; update < 2; ++update) {
    prepare(0.01);
    commit();
  }
  EXPECT_EQ(target_.reserved_at_stage, (std::vector<int>{1, 1}));
  strategy_->on_native_load(false, log_);
  EXPECT_EQ(target_.reserved, 2);
}

TEST_F(DeviceDeltaStrategy, ADenseUpdateIsCopiedInFullAndItsDigestsStillProveTheLiveBytesNextTime) {
  // Every byte changes: each changed storage turns dense, is copied in full, and is digested from its new bytes.
  prepare(1.0);
  EXPECT_EQ(strategy_->staged(), (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ(log_.bytes("prepare.delta_upload"), 0u);
  EXPECT_EQ(log_.bytes("prepare.delta_digest"), 0u);
  EXPECT_EQ(commit(), (64u << 10) + 4100 + 1001 + 12);
  // Those digests are what the live check compares the live storages with: were one off, nothing would stage.
  prepare(0.01);
  EXPECT_EQ(strategy_->staged(), (std::vector<bool>{true, true, false, true, false}));
  EXPECT_EQ(commit(), 1001u + 12u);
}

TEST_F(DeviceDeltaStrategy, AStorageWrittenPastTheRecorderIsCopiedInFullAndStagedAgainNextTime) {
  prepare(0.01, 0);
  EXPECT_EQ(strategy_->staged(), (std::vector<bool>{false, true, false, true, false}));
  EXPECT_EQ(commit(), (64u << 10) + 1001 + 12);
  prepare(0.01);  // its digest was taken from the image: the live check passes and it is staged again
  EXPECT_EQ(strategy_->staged(), (std::vector<bool>{true, true, false, true, false}));
  EXPECT_EQ(commit(), 1001u + 12u);
}

TEST_F(DeviceDeltaStrategy, LiveBytesThatDifferAreNeverPatched) {
  target_.live[1][7] ^= 0x01;  // the live storage no longer holds what the images held
  prepare(0.01);
  EXPECT_TRUE(strategy_->staged().empty());
  EXPECT_EQ(log_.bytes("prepare.delta_upload"), 0u);
  uint64_t total = 0;
  for (uint64_t n : sizes_) total += n;
  EXPECT_EQ(commit(), total);  // and the full copy repaired the flipped byte
  prepare(0.01);
  EXPECT_EQ(commit(), 1001u + 12u);
}

TEST_F(DeviceDeltaStrategy, ACorruptedStagedPackIsDroppedBeforeThePause) {
  prepare(0.01);
  target_.pack.at(20) ^= 0x01;
  uint64_t total = 0;
  for (uint64_t n : sizes_) total += n;
  EXPECT_EQ(commit(), total);
}

TEST_F(DeviceDeltaStrategy, APrepareThatCannotRecordCopiesEverythingAndRestoresTheDigests) {
  prepare(0.01);
  prepare(0.01);  // a second prepare before any commit: the images no longer hold the live bytes
  EXPECT_TRUE(strategy_->staged().empty());
  EXPECT_GT(log_.bytes("prepare.delta_digest"), 0u);
  uint64_t total = 0;
  for (uint64_t n : sizes_) total += n;
  EXPECT_EQ(commit(), total);
  prepare(0.01);
  EXPECT_EQ(commit(), 1001u + 12u);
}

}  // namespace
}  // namespace wsb
