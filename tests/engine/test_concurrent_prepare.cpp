// Two prepares on two threads at once, through the engine (both sync modes), follow the state machine
// (modes/sync/sync_state.hpp): while one builds, the other — same target or another — is rejected with
// Error(State) "another prepare is pending" and so is a commit; once the build ended, the same target is an
// idempotent success, an older one is rejected and a newer one supersedes. Racing without any hold, the pair of
// outcomes is one of those the rules allow for the order the threads happened to run in, the prepared version is
// the one those outcomes imply, nothing served moves, and committing it equals a fresh native load.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <future>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "core/errors.hpp"
#include "tests/support/param_names.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 13;
const char* const kPrompt = "two prepares";

/// What one prepare call ended with: "built", "already prepared", or "State: <message>" / "<kind>: <message>".
std::string outcome(Engine& engine, uint32_t target) {
  try {
    return engine.prepare(target).already_prepared ? "already prepared" : "built";
  } catch (const Error& e) {
    return (e.kind() == ErrorKind::State ? "State: " : "other error: ") + std::string(e.what());
  }
}

std::string commit_outcome(Engine& engine, uint32_t target) {
  try {
    engine.commit(target);
    return "committed";
  } catch (const Error& e) {
    return (e.kind() == ErrorKind::State ? "State: " : "other error: ") + std::string(e.what());
  }
}

class EngineConcurrentPrepare : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { test::publish_tiny(dir_ / "store", 2, kSeed); }
  std::unique_ptr<Engine> engine() {
    return std::make_unique<Engine>(EngineOptions{test::tiny_profile(), 2, test::sync_of(GetParam()), dir_ / "store",
                                                  dir_ / ("work" + std::to_string(counter_++)), 2});
  }
  std::unique_ptr<Engine> boot_v0() {
    auto e = engine();
    e->load_native(Store(dir_ / "store").update_dir(0), 0);
    return e;
  }
  /// A fresh engine natively loaded from the FULL checkpoint of `version`.
  test::Served native(uint32_t version) {
    const auto dir = dir_ / ("native" + std::to_string(version));
    if (!std::filesystem::exists(dir)) write_full_checkpoint(test::tiny_profile(), kSeed, version, std::nullopt, dir);
    auto e = engine();
    e->load_native(dir, version);
    return test::served(*e, kPrompt);
  }
  /// Thread A prepares `first` and is held inside its build until thread B's prepare of `second` and commit of
  /// `first` returned; their outcomes.
  struct Overlap {
    std::string first, second, commit_while_pending;
  };
  Overlap overlap(Engine& engine, uint32_t first, uint32_t second) {
    std::promise<void> building, released;
    std::shared_future<void> release = released.get_future().share();
    std::atomic<bool> held{false};
    // Holds the first build of `first` only: a second one (which the state machine must never admit) runs through.
    engine.debug_set_inside_prepare([&building, &held, release, first](uint32_t target) {
      if (target != first || held.exchange(true)) return;
      building.set_value();
      release.wait();
    });
    Overlap out;
    std::thread a([&] { out.first = outcome(engine, first); });
    std::thread b([&] {
      building.get_future().wait();
      out.second = outcome(engine, second);
      out.commit_while_pending = commit_outcome(engine, first);
      released.set_value();
    });
    a.join();
    b.join();
    engine.debug_set_inside_prepare({});  // later prepares of the test run unheld
    return out;
  }
  test::TempDir dir_;
  int counter_ = 0;
};

TEST_P(EngineConcurrentPrepare, SameTargetWhileBuildingIsRejectedAsPending) {
  auto e = boot_v0();
  const test::Served v0 = test::served(*e, kPrompt);
  const Overlap o = overlap(*e, 1, 1);
  EXPECT_EQ(o.first, "built");
  EXPECT_EQ(o.second, "State: prepare 000001: another prepare is pending");
  EXPECT_EQ(o.commit_while_pending, "State: commit 000001: a prepare is pending");
  EXPECT_EQ(test::served(*e, kPrompt), v0);  // the rejected calls changed nothing served
  EXPECT_EQ(outcome(*e, 1), "already prepared");
  e->commit(1);
  EXPECT_EQ(test::served(*e, kPrompt), native(1));
}

TEST_P(EngineConcurrentPrepare, NewerTargetWhileBuildingIsRejectedAsPendingThenSupersedes) {
  auto e = boot_v0();
  const Overlap o = overlap(*e, 1, 2);
  EXPECT_EQ(o.first, "built");
  EXPECT_EQ(o.second, "State: prepare 000002: another prepare is pending");
  EXPECT_EQ(o.commit_while_pending, "State: commit 000001: a prepare is pending");
  EXPECT_EQ(commit_outcome(*e, 2), "State: commit 000002: the prepared version is 000001");
  EXPECT_EQ(e->weight_version(), 0u);
  EXPECT_EQ(outcome(*e, 2), "built");  // after the build ended, the newer target replaces 1
  EXPECT_EQ(commit_outcome(*e, 1), "State: commit 000001: the prepared version is 000002");
  e->commit(2);
  EXPECT_EQ(test::served(*e, kPrompt), native(2));
}

TEST_P(EngineConcurrentPrepare, OlderTargetWhileBuildingIsRejectedAsPendingThenAsOlder) {
  auto e = boot_v0();
  const Overlap o = overlap(*e, 2, 1);
  EXPECT_EQ(o.first, "built");
  // The pending rule comes first: the target is not even compared while another prepare builds.
  EXPECT_EQ(o.second, "State: prepare 000001: another prepare is pending");
  EXPECT_EQ(o.commit_while_pending, "State: commit 000002: a prepare is pending");
  EXPECT_EQ(outcome(*e, 1), "State: prepare 000001: target is older than the prepared version 000002");
  EXPECT_EQ(e->weight_version(), 0u);
  e->commit(2);
  EXPECT_EQ(test::served(*e, kPrompt), native(2));
}

/// Outcomes of prepare(ta) and prepare(tb) started together on two threads (a barrier releases both), without any
/// hold: which one wins is up to the OS scheduler.
std::pair<std::string, std::string> race(Engine& engine, uint32_t ta, uint32_t tb) {
  std::barrier start(2);
  std::string a, b;
  std::thread thread_a([&] {
    start.arrive_and_wait();
    a = outcome(engine, ta);
  });
  std::thread thread_b([&] {
    start.arrive_and_wait();
    b = outcome(engine, tb);
  });
  thread_a.join();
  thread_b.join();
  return {a, b};
}

constexpr int kRounds = 3;  // fresh engines per racing case: more chances for either order

TEST_P(EngineConcurrentPrepare, RacingPreparesOfOneTargetBuildOnce) {
  const test::Served v1 = native(1);
  const std::set<std::string> second_of_pair{"State: prepare 000001: another prepare is pending",  // overlapped
                                             "already prepared"};                                 // ran after
  for (int round = 0; round < kRounds; ++round) {
    auto e = boot_v0();
    auto [a, b] = race(*e, 1, 1);
    RecordProperty("round" + std::to_string(round), a + " | " + b);  // which order the OS ran them in
    if (b == "built") std::swap(a, b);
    EXPECT_EQ(a, "built") << "round " << round;
    EXPECT_EQ(second_of_pair.count(b), 1u) << "round " << round << ": " << b;
    EXPECT_EQ(e->weight_version(), 0u);
    e->commit(1);
    EXPECT_EQ(test::served(*e, kPrompt), v1) << "round " << round;
  }
}

TEST_P(EngineConcurrentPrepare, RacingPreparesOfTwoTargetsLeaveTheVersionTheirOutcomesImply) {
  const test::Served v1 = native(1), v2 = native(2);
  for (int round = 0; round < kRounds; ++round) {
    auto e = boot_v0();
    const auto [one, two] = race(*e, 1, 2);
    RecordProperty("round" + std::to_string(round), one + " | " + two);  // which order the OS ran them in
    // Every order the two threads can run in, with what each call returns and what ends up prepared.
    uint32_t prepared = 0;
    if (one == "built" && two == "State: prepare 000002: another prepare is pending") {
      prepared = 1;  // 1 began first and was still building
    } else if (two == "built" && one == "State: prepare 000001: another prepare is pending") {
      prepared = 2;  // 2 began first and was still building
    } else if (one == "built" && two == "built") {
      prepared = 2;  // 1 had finished when 2 began: 2 superseded it
    } else if (two == "built" && one == "State: prepare 000001: target is older than the prepared version 000002") {
      prepared = 2;  // 2 had finished when 1 began
    }
    ASSERT_NE(prepared, 0u) << "round " << round << ": outcomes no order allows: '" << one << "', '" << two << "'";
    const uint32_t other = prepared == 1 ? 2 : 1;
    EXPECT_EQ(commit_outcome(*e, other), fmt::format("State: commit {}: the prepared version is {}",
                                                     version_string(other), version_string(prepared)));
    EXPECT_EQ(e->weight_version(), 0u);
    e->commit(prepared);
    EXPECT_EQ(test::served(*e, kPrompt), prepared == 1 ? v1 : v2) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineConcurrentPrepare, ::testing::Values("disk", "cpu"), test::StringParamName());

}  // namespace
}  // namespace wsb
