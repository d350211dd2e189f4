// What requests in flight see while a commit replaces the weights, per pause mode (core/pause_mode.hpp): in_place
// keeps the request and stamps each token with the version that computed it (a response spans both versions);
// retract recomputes it at the new version; abort ends it with finish_reason "abort"; drain lets it finish on the
// old weights first. And the reload from a FULL checkpoint equals a native load, refusing a bad one unchanged.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/wait_until.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 7;
const char* const kPrompt = "pause probe";
// Long enough that the request is still decoding when the test pauses the engine (thousands of steps).
constexpr int kLong = 6000;

class PauseModes : public ::testing::Test {
 protected:
  void SetUp() override {
    test::publish_tiny(dir_ / "store", 1, kSeed);
    engine_ = boot(Store(dir_ / "store").update_dir(0), 0);
  }
  std::unique_ptr<Engine> boot(const std::filesystem::path& checkpoint, uint32_t version) {
    auto engine = std::make_unique<Engine>(EngineOptions{test::tiny_profile(), 2, test::sync_of("cpu"), dir_ / "store",
                                                         dir_ / ("work" + std::to_string(counter_++)), 2});
    engine->load_native(checkpoint, version);
    return engine;
  }
  /// A long request started on another thread, returned once the engine is decoding it and has had time to emit
  /// output tokens (its prefill is a dozen steps of thousands).
  std::future<GenerateResponse> start_long() {
    GenerateRequest r;
    r.input_ids = tokenize_bytes(kPrompt);
    r.max_new_tokens = kLong;
    auto future = std::async(std::launch::async, [this, r] { return engine_->generate(r); });
    EXPECT_TRUE(test::wait_until([&] { return engine_->debug_requests_held() == 1; }, "the long request to start"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return future;
  }
  GenerateResponse fresh(Engine& engine) {
    GenerateRequest r;
    r.input_ids = tokenize_bytes(kPrompt);
    r.max_new_tokens = kLong;
    return engine.generate(r);
  }

  test::TempDir dir_;
  int counter_ = 0;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PauseModes, InPlaceKeepsTheRequestAndStampsEachTokenWithItsVersion) {
  engine_->prepare(1);
  auto future = start_long();
  engine_->pause(PauseMode::InPlace);
  ASSERT_EQ(engine_->debug_requests_held(), 1u) << "the request finished before the pause: make kLong longer";
  engine_->commit(1);
  EXPECT_TRUE(engine_->paused());  // the pause's owner reopens the gate
  EXPECT_GT(engine_->resume(), 0.0);
  const GenerateResponse r = future.get();
  // One step per prompt token (the last one yields the first output token), then one per further token.
  ASSERT_EQ(r.step_versions.size(), tokenize_bytes(kPrompt).size() + kLong - 1);
  EXPECT_EQ(r.restarts, 0);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.step_versions.front(), 0u);
  EXPECT_EQ(r.step_versions.back(), 1u);
  EXPECT_TRUE(std::is_sorted(r.step_versions.begin(), r.step_versions.end()));
  EXPECT_EQ(r.weight_version, 1u);  // as SGLang: the version of the last chunk
}

TEST_F(PauseModes, RetractRecomputesTheRequestAtTheNewVersion) {
  engine_->prepare(1);
  auto future = start_long();
  engine_->pause(PauseMode::Retract);
  ASSERT_EQ(engine_->debug_requests_held(), 1u);
  engine_->commit(1);
  engine_->resume();
  const GenerateResponse r = future.get();
  EXPECT_EQ(r.restarts, 1);
  EXPECT_EQ(std::set<uint32_t>(r.step_versions.begin(), r.step_versions.end()), std::set<uint32_t>{1});
  EXPECT_EQ(r.output_ids, fresh(*engine_).output_ids);
}

TEST_F(PauseModes, AbortEndsTheRequestsInFlightAndQueued) {
  auto future = start_long();
  engine_->pause(PauseMode::Abort);
  EXPECT_EQ(engine_->debug_requests_held(), 0u);
  const GenerateResponse r = future.get();
  EXPECT_EQ(r.finish_reason, "abort");
  EXPECT_LT(r.output_ids.size(), static_cast<size_t>(kLong));
  EXPECT_GE(r.step_versions.size(), r.output_ids.size());
  // A request sent while paused waits for resume, then runs in full.
  GenerateRequest small{tokenize_bytes(kPrompt), 4, true};
  auto queued = std::async(std::launch::async, [&] { return engine_->generate(small); });
  EXPECT_EQ(queued.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  engine_->resume();
  EXPECT_EQ(queued.get().finish_reason, "length");
}

TEST_F(PauseModes, DrainLetsTheRequestFinishOnTheOldWeightsFirst) {
  engine_->prepare(1);
  auto future = start_long();
  const CommitReport report = engine_->commit(1, PauseMode::Drain);
  // The commit returned only after the request in flight finished: the engine holds no request, and every token
  // came from v0. (The future itself may become ready a moment later: its thread still has to wake up and return.)
  EXPECT_EQ(engine_->debug_requests_held(), 0u);
  const GenerateResponse r = future.get();
  EXPECT_EQ(std::set<uint32_t>(r.step_versions.begin(), r.step_versions.end()), std::set<uint32_t>{0});
  EXPECT_EQ(r.restarts, 0);
  ASSERT_TRUE(report.pause_seconds.has_value());
  EXPECT_EQ(engine_->weight_version(), 1u);
}

TEST_F(PauseModes, PauseAndResumeRefuseTheWrongOrder) {
  test::expect_error([&] { engine_->resume(); }, ErrorKind::State, {"resume: the engine is not paused"});
  engine_->pause(PauseMode::Retract);
  test::expect_error([&] { engine_->pause(PauseMode::Abort); }, ErrorKind::State, {"pause: already paused (retract)"});
  engine_->resume();
  EXPECT_FALSE(engine_->paused());
}

TEST_F(PauseModes, AReloadFromACheckpointEqualsANativeLoadAndABadOneChangesNothing) {
  const auto v1_dir = dir_ / "full-v1";
  write_full_checkpoint(test::tiny_profile(), kSeed, 1, std::nullopt, v1_dir);
  const test::Served v0 = test::served(*engine_, kPrompt);
  const auto pointers = engine_->storage_pointers();
  // A checkpoint of another model (a tensor missing) is refused before the pause.
  const auto other = dir_ / "other";
  write_full_checkpoint(test::tiny_profile("glm-tiny-fp8"), kSeed, 1, std::nullopt, other);
  EXPECT_THROW(engine_->commit_checkpoint(other, 1), Error);
  EXPECT_EQ(test::served(*engine_, kPrompt), v0);
  EXPECT_TRUE(engine_->healthy());
  const CommitReport report = engine_->commit_checkpoint(v1_dir, 1);
  ASSERT_TRUE(report.pause_seconds.has_value());
  auto native = boot(v1_dir, 1);
  EXPECT_EQ(test::served(*engine_, kPrompt), test::served(*native, kPrompt));
  EXPECT_EQ(engine_->storage_pointers(), pointers);
}

}  // namespace
}  // namespace wsb
