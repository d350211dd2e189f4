// A TP rank that fails after commit mutation started (fault point commit.storage_written: rank 1 throws right after
// its first storage was written, rank 0 complete). The storages then hold mixed versions, so the engine must stop
// serving: health fails, generate / prepare / commit are refused with the reason, requests in flight end with that
// error instead of a token, the version never moves, and no response ever carries anything but v0 with v0's
// fingerprint. The same through `wsbench serve --fault fail-in-commit` (health 503, generate 500) and a profiler
// trial against it, which reports the failed commit.
#include <gtest/gtest.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/engine.hpp"
#include "engine_api/http_engine_client.hpp"
#include "harness/profiler.hpp"
#include "reports/results_json.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/served.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Checksums = std::vector<std::map<std::string, std::string>>;

constexpr uint64_t kSeed = 9;
const char* const kPrompt = "mixed?";

GenerateRequest probe() {
  GenerateRequest r;
  r.input_ids = tokenize_bytes(kPrompt);
  r.max_new_tokens = 6;
  return r;
}

/// What every request got: a response (version, fingerprint) or an error (kind, message), and whether it was sent
/// after the failed commit had returned.
struct Outcome {
  bool ok = false;
  uint32_t version = 0;
  std::string fingerprint;
  ErrorKind kind = ErrorKind::Format;
  std::string message;
  bool after_commit = false;
};

/// Back-to-back probe requests on a thread until stop(); every outcome kept.
class Traffic {
 public:
  explicit Traffic(Engine& engine) : engine_(engine) {
    thread_ = std::thread([this] {
      while (!stop_) {
        Outcome o;
        o.after_commit = committed_;
        try {
          const GenerateResponse r = engine_.generate(probe());
          o.ok = true, o.version = r.weight_version, o.fingerprint = fingerprint(r);
        } catch (const Error& e) {
          o.kind = e.kind(), o.message = e.what();
        }
        std::lock_guard lock(mu_);
        outcomes_.push_back(o);
      }
    });
  }
  ~Traffic() { stop(); }
  void mark_committed() { committed_ = true; }
  /// Lets at least one more request be sent after mark_committed, then joins.
  std::vector<Outcome> stop() {
    if (thread_.joinable()) {
      const size_t seen = count();
      while (committed_ && count() < seen + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stop_ = true;
      thread_.join();
    }
    std::lock_guard lock(mu_);
    return outcomes_;
  }

 private:
  size_t count() {
    std::lock_guard lock(mu_);
    return outcomes_.size();
  }
  Engine& engine_;
  std::atomic<bool> stop_{false}, committed_{false};
  std::mutex mu_;
  std::vector<Outcome> outcomes_;
  std::thread thread_;
};

class CommitFailure : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  const std::string& preset() const { return std::get<0>(GetParam()); }
  const std::string& mode() const { return std::get<1>(GetParam()); }
};

TEST_P(CommitFailure, RankFailingAfterMutationStartedStopsTheEngine) {
  test::TempDir dir;
  const ModelProfile profile = test::tiny_profile(preset());
  const fs::path store = dir / "store";
  test::publish_tiny(store, 2, kSeed, DeltaEncoding::Xor, profile.id);
  write_full_checkpoint(profile, kSeed, 1, std::nullopt, dir / "native1");
  auto native = [&](const fs::path& checkpoint, uint32_t version) {
    Engine e(EngineOptions{profile, 2, test::sync_of(mode()), store, dir / fmt::format("native-work{}", version), 2});
    e.load_native(checkpoint, version);
    return test::served(e, kPrompt);
  };
  const test::Served v0 = native(Store(store).update_dir(0), 0);
  const test::Served v1 = native(dir / "native1", 1);

  const std::vector<RankLayout> layouts = build_rank_layouts(profile, 2);
  const std::string failed_storage = layouts[1].storages[0].name;
  const std::string injected = fmt::format("injected: rank 1 lost its device after writing '{}'", failed_storage);
  EngineOptions options{profile, 2, test::sync_of(mode()), store, dir / "work", 2};
  options.fault_hook = [&](const FaultSite& site) {
    if (site.point == FaultPoint::CommitStorageWritten && site.rank == 1 && site.index == 0) {
      throw Error(ErrorKind::Io, injected);
    }
  };
  // Declared before the engine so that, should the engine keep serving it, the engine's destructor ends the request
  // before the future's destructor waits for it.
  std::future<GenerateResponse> in_flight;
  Engine engine(options);
  engine.load_native(Store(store).update_dir(0), 0);
  ASSERT_EQ(test::served(engine, kPrompt), v0);
  engine.prepare(1);

  const std::string reason = "commit 000001 failed after mutation started: " + injected;
  const std::string stopped = "engine stopped serving: " + reason;
  Traffic traffic(engine);
  // A request long enough to be in flight when the gate closes: it must end with the error, not a token.
  GenerateRequest endless = probe();
  endless.max_new_tokens = 1 << 20;
  in_flight = std::async(std::launch::async, [&] { return engine.generate(endless); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(test::error_message([&] { engine.commit(1); }, ErrorKind::Fatal), reason);
  traffic.mark_committed();
  if (in_flight.wait_for(std::chrono::seconds(30)) == std::future_status::ready) {
    test::expect_error([&] { in_flight.get(); }, ErrorKind::Fatal, {stopped});
  } else {
    ADD_FAILURE() << "the request in flight still runs after the failed commit";
  }

  EXPECT_FALSE(engine.healthy());
  EXPECT_EQ(engine.weight_version(), 0u);
  test::expect_error([&] { engine.generate(probe()); }, ErrorKind::Fatal, {stopped});
  test::expect_error([&] { engine.prepare(2); }, ErrorKind::Fatal, {stopped});
  test::expect_error([&] { engine.commit(1); }, ErrorKind::Fatal, {stopped});

  // Never a mixed-version response: v0 with v0's fingerprint, or the stop error; nothing after the failure.
  const std::vector<Outcome> outcomes = traffic.stop();
  size_t answered = 0, refused_after = 0;
  for (const Outcome& o : outcomes) {
    if (o.ok) {
      ++answered;
      EXPECT_FALSE(o.after_commit) << "a response after the failed commit";
      EXPECT_EQ(o.version, 0u);
      EXPECT_EQ(o.fingerprint, v0.fingerprint);
    } else {
      EXPECT_EQ(o.kind, ErrorKind::Fatal) << o.message;
      EXPECT_EQ(o.message, stopped);
      refused_after += o.after_commit;
    }
  }
  EXPECT_GT(answered, 0u);
  EXPECT_GT(refused_after, 0u);

  // Why stopping was necessary: rank 0 holds v1, rank 1 its first storage at v1 and every other at v0.
  const Checksums live = engine.storage_checksums();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0], v1.checksums[0]);
  EXPECT_NE(live[0], v0.checksums[0]);
  std::map<std::string, std::string> rank1 = v0.checksums[1];
  rank1[failed_storage] = v1.checksums[1].at(failed_storage);
  EXPECT_EQ(live[1], rank1);
  EXPECT_NE(live[1], v1.checksums[1]);
}

INSTANTIATE_TEST_SUITE_P(Tiny, CommitFailure,
                         ::testing::Combine(::testing::Values(std::string("llama-tiny-bf16"),
                                                              std::string("kimi-tiny-nvfp4")),
                                            ::testing::Values(std::string("disk"), std::string("cpu"))),
                         test::PairParamName());

// ---- through `wsbench serve --fault fail-in-commit` ----

EngineLaunch serve_launch(const fs::path& dir, const std::string& mode) {
  EngineLaunch launch;
  launch.options.profile = test::tiny_profile();
  launch.options.tp = 2;
  launch.options.sync = test::sync_of(mode);
  launch.options.store = dir / "store";
  launch.options.workdir = dir / "work";
  launch.engine = "http";
  launch.protocol = "stitch-staging";
  launch.server.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
  launch.server.profiles_dir = WSBENCH_PROFILES_DIR;
  launch.server.command = default_serve_command(launch);
  launch.server.command.insert(launch.server.command.end(), {"--fault", "fail-in-commit"});
  launch.server.ready_timeout_s = 30;
  return launch;
}

std::string serve_reason() {
  const std::string storage = build_rank_layouts(test::tiny_profile(), 2)[1].storages[0].name;
  return fmt::format("commit 000001 failed after mutation started: fault fail-in-commit: rank 1 failed after writing "
                     "storage '{}'",
                     storage);
}

/// The start of serve_reason() as a failure text shows it: the body excerpt holds the first 200 bytes of the answer.
std::string serve_reason_head() { return serve_reason().substr(0, 80); }

class ServeFailInCommit : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeFailInCommit, HealthFailsAndGenerateIsRefused) {
  test::TempDir dir;
  test::publish_tiny(dir / "store", 1, kSeed);
  const EngineLaunch launch = serve_launch(dir.path(), GetParam());
  fs::create_directories(launch.options.workdir);
  HttpEngineClient client(launch, Store(launch.options.store).update_dir(0), 0);
  client.prepare(1);
  test::expect_error([&] { client.commit(1); }, ErrorKind::Fatal,
                     {"POST /commit_weight_update: HTTP 500: the server refused: '", serve_reason_head()});
  EXPECT_FALSE(client.healthy());
  test::expect_error([&] { client.generate(probe()); }, ErrorKind::Fatal,
                     {"POST /generate: HTTP 500: the server refused: '",
                      "engine stopped serving: commit 000001 failed after mutation started"});
  httplib::Client http("127.0.0.1", client.port());
  const auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->body, "the engine stopped serving");
  EXPECT_EQ(client.weight_version(), 0u);  // the version never moved
  const json stop = client.shutdown();
  EXPECT_EQ(stop["status"], "exited with status 0");  // a stopped engine still shuts down cleanly
}

TEST_P(ServeFailInCommit, TheProfilerTrialReportsTheFailedCommitAndTheStoppedEngine) {
  test::TempDir dir;
  MatrixCell cell;
  cell.model = "llama-tiny-bf16";
  cell.sync = test::sync_of(GetParam());
  cell.engine = "http";
  cell.protocol = "stitch-staging";
  cell.tp = 2;
  cell.n = 1;
  cell.seed = kSeed;
  cell.id = "tiny/" + GetParam() + "/fail-in-commit";
  cell.floor_bytes = 1 << 20;
  cell.server_ready_timeout_s = 30;
  EngineLaunch launch;
  launch.protocol = "stitch-staging";
  cell.server_command = default_serve_command(launch);
  cell.server_command.insert(cell.server_command.end(), {"--fault", "fail-in-commit"});
  CellRunOptions options{WSBENCH_PROFILES_DIR, dir / "work", false};
  options.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
  const json result = run_cell(cell, options);
  ASSERT_EQ(result["status"], "fail") << result.dump(2);
  ASSERT_EQ(result["trials"].size(), 1u) << result.dump(2);
  const json& trial = result["trials"][0];
  EXPECT_EQ(trial["status"], "fail");
  const std::string reason = trial["reason"];
  EXPECT_TRUE(reason.starts_with("update_succeeds: POST /commit_weight_update: HTTP 500: the server refused: '"))
      << reason;
  EXPECT_NE(reason.find(serve_reason_head()), std::string::npos) << reason;
  std::map<std::string, json> checks;
  for (const auto& c : trial["checks"]) checks[c["name"]] = c;
  EXPECT_EQ(checks["version_is_target"]["detail"], "served 000000 expected 000001");
  EXPECT_EQ(checks["engine_answers"]["pass"], false);
  const std::string detail = checks["engine_answers"]["detail"];
  EXPECT_TRUE(detail.starts_with("POST /generate: HTTP 500: the server refused: '")) << detail;
  EXPECT_NE(detail.find("engine stopped serving: commit 000001"), std::string::npos) << detail;
}

INSTANTIATE_TEST_SUITE_P(Modes, ServeFailInCommit, ::testing::Values(std::string("disk"), std::string("cpu")));

}  // namespace
}  // namespace wsb
