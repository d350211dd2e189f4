// The probe client's waits against a scripted engine: the wait after a commit counts responses to requests sent after
// the commit returned (responses at the target that were requested before it do not end the wait), and it waits as
// long as the engine keeps answering.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/phase_log.hpp"
#include "harness/probe.hpp"

namespace wsb {
namespace {

/// Answers every generate after `delay` at the version currently set (or throws while `fail`); `hold()` makes the next
/// calls block until `release()`. Every other call is refused: the probe client only generates.
class ScriptedEngine : public EngineClient {
 public:
  explicit ScriptedEngine(std::chrono::milliseconds delay) : delay_(delay) {}
  std::atomic<uint32_t> version{0};
  std::atomic<bool> fail{false};  ///< every generate throws
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  GenerateResponse generate(const GenerateRequest&) override {
    std::this_thread::sleep_for(delay_);
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !held_; });
    }
    if (fail) throw std::runtime_error("engine down");
    GenerateResponse r;
    r.weight_version = version.load();
    return r;
  }
  PrepareReport prepare(uint32_t) override { throw std::logic_error("prepare"); }
  CommitReport commit(uint32_t) override { throw std::logic_error("commit"); }
  std::vector<std::map<std::string, std::string>> storage_checksums() override { return {}; }
  std::vector<std::vector<StoragePointer>> storage_pointers() override { return {}; }
  uint32_t weight_version() override { return version.load(); }
  bool healthy() override { return true; }
  std::optional<ModeMemory> mode_memory() override { return std::nullopt; }
  std::vector<PhaseRecord> boot_phases() override { return {}; }

 private:
  std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
};

int sent_after(const std::vector<ProbeSample>& samples, double t, uint32_t version) {
  int n = 0;
  for (const auto& s : samples) n += s.error.empty() && s.sent > t && s.version == version;
  return n;
}

TEST(ProbeClient, WaitAfterCommitIgnoresTargetResponsesRequestedBeforeTheCommitReturned) {
  // The engine switches to v1 and serves many responses at v1 before the client sees the commit's reply (as an HTTP
  // engine does when its reply is slow): those must not end the wait.
  ScriptedEngine engine(std::chrono::milliseconds(1));
  ProbeClient probe(engine);
  probe.start();
  ASSERT_GT(probe.wait_for_version(0, 5.0), 0);
  engine.version = 1;
  ASSERT_GT(probe.wait_for_version(1, 5.0, 5), 0);
  const double commit_end = steady_seconds();
  const double got = probe.wait_for_sent_after(commit_end, 2, 5.0);
  probe.stop();
  EXPECT_GT(got, commit_end);
  EXPECT_GE(sent_after(probe.samples(), commit_end, 1), 2);
}

TEST(ProbeClient, WaitAfterCommitWaitsForASlowEngineThatStillAnswers) {
  // Each response takes 100 ms; five of them take 500 ms, well past the 300 ms idle timeout: a deadline from the start
  // of the wait gives up, one that moves with every answer does not.
  ScriptedEngine engine(std::chrono::milliseconds(100));
  ProbeClient probe(engine);
  probe.start();
  const double t0 = steady_seconds();
  const double got = probe.wait_for_sent_after(t0, 5, 0.3);
  probe.stop();
  EXPECT_GT(got, t0 + 0.4);
  EXPECT_GE(sent_after(probe.samples(), t0, 0), 5);
}

TEST(ProbeClient, WaitAfterCommitGivesUpWhenTheEngineOnlyFails) {
  // A probe retries a failed request every few milliseconds: failures must not keep the wait alive.
  ScriptedEngine engine(std::chrono::milliseconds(1));
  engine.fail = true;
  ProbeClient probe(engine);
  probe.start();
  const double t0 = steady_seconds();
  EXPECT_EQ(probe.wait_for_sent_after(t0, 1, 0.2), -1);
  EXPECT_LT(steady_seconds() - t0, 5.0);
  probe.stop();
  EXPECT_FALSE(probe.samples().empty());
}

TEST(ProbeClient, WaitAfterCommitGivesUpWhenTheEngineStopsAnswering) {
  ScriptedEngine engine(std::chrono::milliseconds(1));
  ProbeClient probe(engine);
  probe.start();
  ASSERT_GT(probe.wait_for_version(0, 5.0), 0);
  engine.hold();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the request in flight is now held
  const double t0 = steady_seconds();
  EXPECT_EQ(probe.wait_for_sent_after(t0, 1, 0.2), -1);
  EXPECT_GE(steady_seconds() - t0, 0.2);
  engine.release();
  probe.stop();
}

}  // namespace
}  // namespace wsb
