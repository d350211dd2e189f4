// kill -9 in the middle of disk-mode materialization, then a new engine on the same workdir. A child process serves
// v1 (its mutable checkpoint verified at v1), starts preparing v2 and is SIGKILLed by this process once half of the
// target's tensors are written into the checkpoint (fault point disk.checkpoint_write: the child reports it and
// stops there). The checkpoint left behind mixes v1 and v2 tensors and has no state file (cleared before
// mutation), so the next engine's prepare must reseed from the FULL publication rather than trust it, and the result
// must be exactly a native load of v2.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>

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

/// The child: boots at v0, updates to v1, then prepares v2 and, at tensor `kill_at` of the checkpoint write, tells
/// the parent through `ready` and waits to be killed. Never returns.
[[noreturn]] void child(const ModelProfile& profile, const fs::path& store, const fs::path& workdir, size_t kill_at,
                        int ready) {
  std::atomic<bool> armed{false};
  EngineOptions options{profile, 2, test::sync_of("disk"), store, workdir, 2};
  options.fault_hook = [&](const FaultSite& site) {
    if (!armed || site.point != FaultPoint::DiskCheckpointWrite || site.index != kill_at) return;
    const char byte = 'k';
    if (::write(ready, &byte, 1) != 1) ::_exit(kChildThrew);
    for (;;) ::pause();  // SIGKILL arrives here, between two tensor writes
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
std::string run_and_kill(const ModelProfile& profile, const fs::path& store, const fs::path& workdir, size_t kill_at) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(pipe_fds[0]);
    child(profile, store, workdir, kill_at, pipe_fds[1]);
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

class CrashRecovery : public ::testing::TestWithParam<std::string> {};

TEST_P(CrashRecovery, KillNineDuringMaterializationIsReseededAndExact) {
  test::TempDir dir;
  const ModelProfile profile = test::tiny_profile(GetParam());
  const fs::path store = dir / "store";
  const fs::path workdir = dir / "work";
  test::publish_tiny(store, 2, kSeed, DeltaEncoding::Xor, profile.id);
  const fs::path full1 = dir / "native1", full2 = dir / "native2";
  write_full_checkpoint(profile, kSeed, 1, std::nullopt, full1);
  write_full_checkpoint(profile, kSeed, 2, std::nullopt, full2);
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  const size_t kill_at = tensors.size() / 2;

  // No engine (no thread) exists in this process yet: the fork copies a single-threaded process.
  ASSERT_EQ(run_and_kill(profile, store, workdir, kill_at), "");

  // What the crash left: tensors 0..kill_at written at v2, the rest still v1, and no state file vouching for it.
  const fs::path checkpoint = workdir / "checkpoint";
  EXPECT_FALSE(fs::exists(checkpoint / ".weight_sync" / "state.json"));
  {
    CheckpointReader left(checkpoint), v1(full1), v2(full2);
    size_t written_changed = 0, unwritten_changed = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& name = tensors[t].name;
      const bool changed = tensor_bytes(v1, name) != tensor_bytes(v2, name);
      EXPECT_EQ(tensor_bytes(left, name), tensor_bytes(t <= kill_at ? v2 : v1, name)) << name;
      (t <= kill_at ? written_changed : unwritten_changed) += changed;
    }
    // The mixed checkpoint differs from both versions, so trusting it would be visible.
    EXPECT_GT(written_changed, 0u);
    EXPECT_GT(unwritten_changed, 0u);
  }

  // The restarted server boots from v1's FULL checkpoint on the same workdir and prepares v2 again.
  Engine engine(EngineOptions{profile, 2, test::sync_of("disk"), store, workdir, 2});
  engine.load_native(full1, 1);
  const auto& disk = dynamic_cast<const DiskMode&>(engine.mode());
  EXPECT_FALSE(disk.read_state().has_value());  // detected as unverified
  const PrepareReport report = engine.prepare(2);
  const bool reseeded = std::any_of(report.phases.begin(), report.phases.end(),
                                    [](const PhaseRecord& p) { return p.name == "prepare.seed"; });
  EXPECT_TRUE(reseeded);
  const auto state = disk.read_state();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->version, 2u);
  EXPECT_EQ(state->seeded_from, 0u);  // from the FULL v0 publication, not the crashed v1 checkpoint
  engine.commit(2);

  Engine native(EngineOptions{profile, 2, test::sync_of("disk"), store, dir / "native-work", 2});
  native.load_native(full2, 2);
  const test::Served reference = test::served(native, kPrompt);
  const test::Served updated = test::served(engine, kPrompt);
  EXPECT_EQ(updated.version, 2u);
  ASSERT_EQ(updated.checksums.size(), 2u);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(updated.checksums[r], reference.checksums[r]) << "rank " << r;
  EXPECT_EQ(updated.fingerprint, reference.fingerprint);
  {
    CheckpointReader materialized(checkpoint), v2(full2);
    for (const auto& spec : tensors) EXPECT_EQ(tensor_bytes(materialized, spec.name), tensor_bytes(v2, spec.name));
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, CrashRecovery,
                         ::testing::Values(std::string("llama-tiny-bf16"), std::string("kimi-tiny-nvfp4")),
                         test::StringParamName());

}  // namespace
}  // namespace wsb
