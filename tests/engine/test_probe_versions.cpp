// Probe requests arriving before, during and after a commit's pause, from several client threads while the engine's
// scheduler, prepare and commit run: every response carries exactly one weight version and the fingerprint a fresh
// native load of that version gives the same request (a response that mixed versions would match neither). The
// requests held when the gate closes are exactly the ones answered at the target; a request that had decoded before
// the pause was restarted; requests sent inside the pause are queued and served at the target; no decode step runs
// inside the pause.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "engine/engine.hpp"
#include "core/phase_log.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/param_names.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/wait_until.hpp"

namespace wsb {
namespace {

constexpr uint64_t kSeed = 11;
constexpr int kClients = 2;       // back-to-back probe threads during prepare, and after the commit
constexpr int kAfterEach = 2;     // requests each client sends after the commit returned
constexpr int kInFlight = 2;      // long requests accepted before commit is called
constexpr int kDuringPause = 2;   // requests sent from inside the pause
// The long requests decode for about this long: commit closes the gate a step or so after it is called, so they
// are still decoding then even when the test's threads were descheduled for a while on a busy machine. One that
// finished first would be answered at v0 (allowed, and counted); the test requires one of them to be held.
constexpr double kLongSeconds = 0.1;

GenerateRequest probe() {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("probe");
  r.max_new_tokens = 4;
  return r;
}

GenerateRequest long_probe(int tokens) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("held");
  r.max_new_tokens = tokens;
  return r;
}

/// New tokens that take about kLongSeconds on `engine` in this build (ThreadSanitizer decodes ~100x slower than
/// -O2): a size derived from one request's step times, never a time the test asserts.
int long_tokens(Engine& engine) {
  GenerateRequest r = probe();
  r.max_new_tokens = 16;
  const std::vector<double> steps = engine.generate(r).step_times;
  const double per_step = (steps.back() - steps.front()) / static_cast<double>(steps.size() - 1);
  return std::clamp(static_cast<int>(kLongSeconds / std::max(per_step, 1e-6)), 16, 2000);
}

/// One response as its client saw it.
struct Answer {
  uint32_t version = 0;
  std::string fingerprint;
  int restarts = 0;
  std::vector<double> step_times;
};

Answer ask(Engine& engine, const GenerateRequest& request) {
  GenerateResponse r = engine.generate(request);
  return {r.weight_version, fingerprint(r), r.restarts, std::move(r.step_times)};
}

/// Fingerprints of probe() and long_probe() on a fresh engine natively loaded at one version.
struct Reference {
  std::string probe, long_probe;
};

class EngineProbeVersions : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { test::publish_tiny(dir_ / "store", 1, kSeed); }
  EngineOptions options(const std::string& work) const {
    return EngineOptions{test::tiny_profile(), 2, test::sync_of(GetParam()), dir_ / "store", dir_ / work, 2};
  }
  Reference native(uint32_t version, int tokens) {
    auto checkpoint = Store(dir_ / "store").update_dir(0);
    if (version != 0) {
      checkpoint = dir_ / ("native" + std::to_string(version));
      write_full_checkpoint(test::tiny_profile(), kSeed, version, std::nullopt, checkpoint);
    }
    Engine engine(options("native-work" + std::to_string(version)));
    engine.load_native(checkpoint, version);
    return {ask(engine, probe()).fingerprint, ask(engine, long_probe(tokens)).fingerprint};
  }
  test::TempDir dir_;
};

/// kClients threads send probe() back to back, each at least `each` times and on until `work` returned; every
/// answer, in no particular order.
std::vector<Answer> traffic(Engine& engine, size_t each, const std::function<void()>& work) {
  std::atomic<bool> done{false};
  std::vector<std::vector<Answer>> answers(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      while (answers[c].size() < each || !done) answers[c].push_back(ask(engine, probe()));
    });
  }
  work();
  done = true;
  for (auto& t : clients) t.join();
  std::vector<Answer> all;
  for (auto& a : answers) all.insert(all.end(), a.begin(), a.end());
  return all;
}

TEST_P(EngineProbeVersions, EveryResponseCarriesOneVersionWithItsNativeFingerprint) {
  Engine engine(options("work"));
  size_t held_at_pause = 0;
  double pause_begin = 0, pause_end = 0;
  std::vector<std::future<Answer>> sent_in_pause;
  engine.debug_set_inside_pause([&] {
    pause_begin = steady_seconds();
    held_at_pause = engine.debug_requests_held();
    for (int i = 0; i < kDuringPause; ++i) {
      sent_in_pause.push_back(std::async(std::launch::async, [&] { return ask(engine, probe()); }));
    }
    // The gate stays closed until the engine accepted all of them: each one arrived during the pause.
    test::wait_until([&] { return engine.debug_requests_held() == held_at_pause + kDuringPause; },
                     "the requests sent inside the pause to be queued");
    pause_end = steady_seconds();
  });
  engine.load_native(Store(dir_ / "store").update_dir(0), 0);
  const int tokens = long_tokens(engine);
  RecordProperty("long_tokens", tokens);
  const Reference v0 = native(0, tokens), v1 = native(1, tokens);
  ASSERT_NE(v0.probe, v1.probe);
  ASSERT_NE(v0.long_probe, v1.long_probe);

  // Before the pause: clients keep sending while prepare builds v1 on the mode's threads; all answered before
  // commit is called.
  const std::vector<Answer> before = traffic(engine, 1, [&] { engine.prepare(1); });
  // Held across the pause: long requests the engine accepted before commit was called.
  std::vector<std::future<Answer>> in_flight;
  for (int i = 0; i < kInFlight; ++i) {
    in_flight.push_back(std::async(std::launch::async, [&] { return ask(engine, long_probe(tokens)); }));
  }
  // Accepted: held by the engine, or already answered (then at v0).
  const auto answered = [&] {
    return std::count_if(in_flight.begin(), in_flight.end(), [](const auto& f) {
      return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
  };
  ASSERT_TRUE(test::wait_until([&] { return engine.debug_requests_held() + answered() == kInFlight; },
                               "the long requests to be accepted"));
  engine.commit(1);
  // After the pause: clients send a fixed number each once commit returned.
  const std::vector<Answer> after = traffic(engine, kAfterEach, [] {});

  ASSERT_GE(before.size(), size_t{kClients});
  ASSERT_EQ(after.size(), size_t{kClients * kAfterEach});
  for (const Answer& a : before) {
    EXPECT_EQ(a.version, 0u);
    EXPECT_EQ(a.fingerprint, v0.probe);
    EXPECT_EQ(a.restarts, 0);
  }
  EXPECT_GE(held_at_pause, 1u);  // the pause did cut through a request
  size_t answered_at_target = 0;
  std::vector<Answer> all = before;
  for (auto& f : in_flight) {
    const Answer a = f.get();
    all.push_back(a);
    ASSERT_TRUE(a.version == 0 || a.version == 1) << a.version;
    EXPECT_EQ(a.fingerprint, a.version == 0 ? v0.long_probe : v1.long_probe) << "version " << a.version;
    if (a.version == 1) ++answered_at_target;
    // Restarted exactly when it had decoded before the gate closed: then every token it returns is from v1.
    const bool decoded_before = !a.step_times.empty() && a.step_times.front() < pause_begin;
    EXPECT_EQ(a.restarts, a.version == 1 && decoded_before ? 1 : 0);
  }
  EXPECT_EQ(answered_at_target, held_at_pause);
  RecordProperty("held_at_pause", static_cast<int>(held_at_pause));
  ASSERT_EQ(sent_in_pause.size(), size_t{kDuringPause});
  for (auto& f : sent_in_pause) {
    const Answer a = f.get();
    all.push_back(a);
    EXPECT_EQ(a.version, 1u);
    EXPECT_EQ(a.fingerprint, v1.probe);
    EXPECT_EQ(a.restarts, 0);
    EXPECT_GT(a.step_times.front(), pause_end);  // queued, not decoded, while the gate was closed
  }
  for (const Answer& a : after) {
    all.push_back(a);
    EXPECT_EQ(a.version, 1u);
    EXPECT_EQ(a.fingerprint, v1.probe);
    EXPECT_EQ(a.restarts, 0);
  }
  // The pause admits no decode step.
  for (const Answer& a : all) {
    for (double t : a.step_times) {
      EXPECT_FALSE(t > pause_begin && t < pause_end) << "a decode step ended inside the pause";
    }
  }
  EXPECT_EQ(engine.weight_version(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineProbeVersions, ::testing::Values("disk", "cpu"), test::StringParamName());

}  // namespace
}  // namespace wsb
