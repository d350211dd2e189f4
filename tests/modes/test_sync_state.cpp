// Rules of the prepare/commit state machine (docs/design.md "Sync modes").
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "modes/sync/sync_state.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

/// The message of the Error(State) `fn` throws.
std::string state_error(const std::function<void()>& fn) { return test::error_message(fn, ErrorKind::State); }

TEST(SyncStateMachine, FirstPrepareBuildsAndSecondSameTargetIsIdempotent) {
  SyncStateMachine sm(0);
  EXPECT_EQ(sm.begin_prepare(1).action, PrepareAction::Build);
  EXPECT_TRUE(sm.preparing());
  sm.finish_prepare(1, true, 1);
  EXPECT_EQ(sm.prepared(), 1u);
  EXPECT_EQ(sm.begin_prepare(1).action, PrepareAction::AlreadyPrepared);
  EXPECT_FALSE(sm.preparing());
}

TEST(SyncStateMachine, RejectsTargetNotNewerThanServed) {
  SyncStateMachine sm(2);
  EXPECT_EQ(state_error([&] { sm.begin_prepare(2); }),
            "prepare 000002: target is not newer than the served version 000002");
  EXPECT_EQ(state_error([&] { sm.begin_prepare(1); }),
            "prepare 000001: target is not newer than the served version 000002");
}

TEST(SyncStateMachine, RejectsOlderThanPreparedAndSupersedesWithNewer) {
  SyncStateMachine sm(0);
  sm.begin_prepare(2);
  sm.finish_prepare(2, true, 2);
  EXPECT_EQ(state_error([&] { sm.begin_prepare(1); }),
            "prepare 000001: target is older than the prepared version 000002");
  EXPECT_EQ(sm.prepared(), 2u);
  EXPECT_EQ(sm.begin_prepare(3).action, PrepareAction::Build);
  sm.finish_prepare(3, true, 3);  // superseded prepared version replaced
  EXPECT_EQ(state_error([&] { sm.begin_commit(2); }), "commit 000002: the prepared version is 000003");
}

TEST(SyncStateMachine, RejectsConcurrentPrepareAndCommitWhilePreparing) {
  SyncStateMachine sm(0);
  sm.begin_prepare(1);
  EXPECT_EQ(state_error([&] { sm.begin_prepare(2); }), "prepare 000002: another prepare is pending");
  EXPECT_EQ(state_error([&] { sm.begin_commit(1); }), "commit 000001: a prepare is pending");
  sm.finish_prepare(1, false, std::nullopt);
  EXPECT_EQ(sm.prepared(), std::nullopt);  // a failed prepare prepares nothing
  EXPECT_EQ(state_error([&] { sm.begin_commit(1); }), "commit 000001: nothing is prepared");
}

TEST(SyncStateMachine, RejectedPrepareKeepsWhatTheModeStillHolds) {
  SyncStateMachine sm(0);
  sm.begin_prepare(1);
  sm.finish_prepare(1, true, 1);
  sm.begin_prepare(9);  // e.g. 9 is not published: the mode refuses before touching version 1's artefacts
  sm.finish_prepare(9, false, 1);
  EXPECT_EQ(sm.prepared(), 1u);
  sm.begin_commit(1);
  sm.finish_commit(1, true);
  EXPECT_EQ(sm.served(), 1u);
}

TEST(SyncStateMachine, NoPrepareOrSecondCommitWhileACommitRuns) {
  SyncStateMachine sm(0);
  sm.begin_prepare(1);
  sm.finish_prepare(1, true, 1);
  sm.begin_commit(1);
  EXPECT_EQ(state_error([&] { sm.begin_prepare(2); }), "prepare 000002: a commit is in progress");
  EXPECT_EQ(state_error([&] { sm.begin_commit(1); }), "commit 000001: another commit is in progress");
  sm.finish_commit(1, false);  // a failed commit ends without moving the served version
  EXPECT_EQ(sm.served(), 0u);
  EXPECT_EQ(sm.begin_prepare(2).action, PrepareAction::Build);
}

TEST(SyncStateMachine, StagingOffRejectsPrepare) {
  SyncStateMachine sm(0);
  sm.set_staging_enabled(false);
  EXPECT_EQ(state_error([&] { sm.begin_prepare(1); }), "prepare 000001: weight-update staging is off");
}

TEST(SyncStateMachine, CommitMovesServedOnlyWhenFinished) {
  SyncStateMachine sm(0);
  sm.begin_prepare(1);
  sm.finish_prepare(1, true, 1);
  sm.begin_commit(1);
  EXPECT_EQ(sm.served(), 0u);
  sm.finish_commit(1, true);
  EXPECT_EQ(sm.served(), 1u);
  EXPECT_EQ(sm.prepared(), std::nullopt);
}

}  // namespace
}  // namespace wsb
