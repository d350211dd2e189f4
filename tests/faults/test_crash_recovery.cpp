// kill -9 in the middle of disk-mode materialization, then a new engine on the same workdir. A child process serves
// v1 (its mutable checkpoint verified at v1), starts preparing v2 and is SIGKILLed by this process at a fault point:
// - disk.checkpoint_write, once half of the target's tensors are written into the new checkpoint directory beside the
//   verified one: the verified v1 checkpoint and its state are untouched, so the next engine goes on from them
//   (no reseed) and ignores the half-written directory;
// - disk.checkpoint_swap, when the complete v2 directory is about to replace the verified one: the state was
//   cleared and the v1 checkpoint moved aside, so nothing is vouched for and the next engine must rebuild v2 from a
//   base it can verify (the checkpoint it was natively loaded from) rather than trust either directory.
// Either way the result must be exactly a native load of v2.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>

#include "engine/engine.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "publisher/publisher.hpp"
#include "modes/disk/disk_mode.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 5;
const char* const kPrompt = "crash";

/// Exit codes of the child when it does not reach the kill point (the parent reports them).
constexpr int kChildPrepareReturned = 3;
constexpr int kChildThrew = 4;

/// The child: boots at v0, updates to v1, then prepares v2 and, at fault point `point` (for disk.checkpoint_write:
/// the tensor of index `kill_at`), tells the parent through `ready` and waits to be killed. Never returns.
[[noreturn]] void child(const ModelProfile& profile, const fs::path& store, const fs::path& workdir, FaultPoint point,
                        size_t kill_at, int ready) {
  std::atomic<bool> armed{false};
  EngineOptions options{profile, 2, test::sync_of("disk"), store, workdir, 2};
  options.fault_hook = [&](const FaultSite& site) {
    if (!armed || site.point != point || (point == FaultPoint::DiskCheckpointWrite && site.index != kill_at)) return;
    const char byte = 'k';
    if (::write(ready, &byte, 1) != 1) ::_exit(kChildThrew);
    for (;;) ::pause();  // SIGKILL arrives here
  };
  try {
    Engine engine(options);
    engine.load_native(Store(store).update_dir(0), 0);
    engine.prepare(1);
    engine.commit(1);
    armed = true;
    engine.prepare(2);
  } catch (const std::exception& e) {
    std::cerr << "crash-recovery child: " << e.what() << std::endl;
    ::_exit(kChildThrew);
  }
  ::_exit(kChildPrepareReturned);
}

/// Forks the child, waits for it to reach the kill point, kills it with SIGKILL and reaps it. Returns "" when it
/// died of that SIGKILL, else what happened instead.
std::string run_and_kill(const ModelProfile& profile, const fs::path& store, const fs::path& workdir, FaultPoint point,
                         size_t kill_at) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(pipe_fds[0]);
    child(profile, store, workdir, point, kill_at, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  pollfd ready{pipe_fds[0], POLLIN, 0};
  char byte = 0;
  const bool reached = ::poll(&ready, 1, 120'000) == 1 && ::read(pipe_fds[0], &byte, 1) == 1;
  ::close(pipe_fds[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!reached) {
    return WIFEXITED(status) ? "the child exited with status " + std::to_string(WEXITSTATUS(status)) +
                                   " before the kill point"
                             : "the child never reached the kill point";
  }
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) return "the child did not die of SIGKILL";
  return "";
}

std::vector<uint8_t> tensor_bytes(const CheckpointReader& reader, const std::string& name) {
  const auto bytes = reader.data(name);
  return {bytes.begin(), bytes.end()};
}

std::map<std::string, std::vector<uint8_t>> all_tensors(const fs::path& dir) {
  CheckpointReader reader(dir);
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& name : reader.tensor_names()) out[name] = tensor_bytes(reader, name);
  return out;
}

class CrashRecovery : public ::testing::TestWithParam<std::tuple<std::string, FaultPoint>> {
 protected:
  const ModelProfile profile = test::tiny_profile(std::get<0>(GetParam()));
  const FaultPoint point = std::get<1>(GetParam());
};

TEST_P(CrashRecovery, KillNineDuringMaterializationLeavesNothingTrustedThatIsWrong) {
  test::TempDir dir;
  const fs::path store = dir / "store";
  const fs::path workdir = dir / "work";
  test::publish_tiny(store, 2, kSeed, DeltaEncoding::Xor, profile.id);
  const fs::path full1 = dir / "native1", full2 = dir / "native2";
  write_full_checkpoint(profile, kSeed, 1, std::nullopt, full1);
  write_full_checkpoint(profile, kSeed, 2, std::nullopt, full2);
  const size_t kill_at = profile.canonical_tensors().size() / 2;

  // No engine (no thread) exists in this process yet: the fork copies a single-threaded process.
  ASSERT_EQ(run_and_kill(profile, store, workdir, point, kill_at), "");

  const fs::path checkpoint = workdir / "checkpoint";
  const fs::path next = workdir / "checkpoint.next";
  if (point == FaultPoint::DiskCheckpointWrite) {
    // The verified v1 checkpoint and its state are as the v1 update left them; the v2 directory has no index yet.
    EXPECT_EQ(all_tensors(checkpoint), all_tensors(full1));
    EXPECT_TRUE(fs::exists(checkpoint / ".weight_sync" / "state.json"));
    EXPECT_TRUE(fs::exists(next));
    EXPECT_FALSE(fs::exists(next / kIndexFileName));
  } else {
    // Mid-swap: no checkpoint in place, its state gone with the v1 directory moved aside, v2 complete but unvouched.
    EXPECT_FALSE(fs::exists(checkpoint));
    EXPECT_EQ(all_tensors(workdir / "checkpoint.old"), all_tensors(full1));
    EXPECT_FALSE(fs::exists(workdir / "checkpoint.old" / ".weight_sync" / "state.json"));
    EXPECT_EQ(all_tensors(next), all_tensors(full2));
  }

  // The restarted server boots from v1's FULL checkpoint on the same workdir and prepares v2 again.
  Engine engine(EngineOptions{profile, 2, test::sync_of("disk"), store, workdir, 2});
  engine.load_native(full1, 1);
  const auto& disk = dynamic_cast<const DiskMode&>(engine.mode());
  const auto left = disk.read_state();
  if (point == FaultPoint::DiskCheckpointWrite) {
    ASSERT_TRUE(left.has_value());
    EXPECT_EQ(left->version, 1u);
  } else {
    EXPECT_FALSE(left.has_value());  // detected as unverified
  }
  engine.prepare(2);
  ASSERT_TRUE(disk.last_base().has_value());
  const auto state = disk.read_state();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->version, 2u);
  if (point == FaultPoint::DiskCheckpointWrite) {
    EXPECT_EQ(disk.last_base()->kind, DiskBase::Kind::Local);  // went on from the verified v1: no reseed
    EXPECT_EQ(disk.last_base()->version, 1u);
    EXPECT_EQ(state->seeded_from, 0u);  // the lineage still starts at the FULL v0 the first engine loaded
  } else {
    EXPECT_EQ(disk.last_base()->kind, DiskBase::Kind::Native);  // the checkpoint this engine loaded, not a leftover
    EXPECT_EQ(disk.last_base()->version, 1u);
    EXPECT_EQ(state->seeded_from, 1u);
  }
  EXPECT_FALSE(fs::exists(next));
  if (point == FaultPoint::DiskCheckpointWrite) {
    // The v1 checkpoint this prepare replaced waits, unvouched, for the commit to remove it.
    EXPECT_EQ(all_tensors(workdir / "checkpoint.old"), all_tensors(full1));
    EXPECT_FALSE(fs::exists(workdir / "checkpoint.old" / ".weight_sync" / "state.json"));
  } else {
    EXPECT_FALSE(fs::exists(workdir / "checkpoint.old"));  // the crashed swap's leftover, removed, never trusted
  }
  engine.commit(2);

  Engine native(EngineOptions{profile, 2, test::sync_of("disk"), store, dir / "native-work", 2});
  native.load_native(full2, 2);
  const test::Served reference = test::served(native, kPrompt);
  const test::Served updated = test::served(engine, kPrompt);
  EXPECT_EQ(updated.version, 2u);
  ASSERT_EQ(updated.checksums.size(), 2u);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(updated.checksums[r], reference.checksums[r]) << "rank " << r;
  EXPECT_EQ(updated.fingerprint, reference.fingerprint);
  EXPECT_EQ(all_tensors(checkpoint), all_tensors(full2));
}

INSTANTIATE_TEST_SUITE_P(Tiny, CrashRecovery,
                         ::testing::Combine(::testing::Values(std::string("llama-tiny-bf16"),
                                                              std::string("kimi-tiny-nvfp4")),
                                            ::testing::Values(FaultPoint::DiskCheckpointWrite,
                                                              FaultPoint::DiskCheckpointSwap)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_" +
                                              std::string(fault_point_name(std::get<1>(info.param)));
                           for (char& c : name) {
                             if (c == '-' || c == '.') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace wsb
