// The vllm protocol end to end without sockets: the client table (vllm.cpp) builds every request, the routes of
// `wsbench serve --protocol vllm` (vllm_routes.cpp) answer them over an embedded engine, the table parses the
// answers. A disk reload ends at the target with the storages of a fresh native load; keep spans versions in place,
// abort ends requests with finish_reason "abort", wait drains before the gate closes; refusals carry vLLM's status
// and error shapes; every request and answer fits the recorded fixtures (tests/fixtures/protocols/vllm/).
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <thread>

#include "core/phase_log.hpp"
#include "engine/engine.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/vllm_wire.hpp"
#include "models/forward/forward.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/protocol_fixtures.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/wait_until.hpp"


namespace wsb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr uint64_t kSeed = 7;
constexpr uint32_t kTarget = 2;
// The long request decodes for about this long, so it is still decoding when the test pauses right after a short
// request it overlapped has finished (the size comes from measured step times, never a time the test asserts).
constexpr double kLongSeconds = 0.3;

GenerateRequest probe(int tokens = 6) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("probe");
  r.max_new_tokens = tokens;
  return r;
}

GenerateRequest long_probe(int tokens) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("held");
  r.max_new_tokens = tokens;
  return r;
}

class VllmProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    test::publish_tiny(dir_ / "store", kTarget, kSeed);
    engine_ = std::make_unique<Engine>(options("work"));
    engine_->load_native(boot(), 0);
    state_ = std::make_unique<ServeState>(*engine_, WeightVersion::parse("0"), boot(), dir_ / "serve");
    routes_ = vllm_routes(*state_);
    protocol_ = make_protocol("vllm");
  }

  EngineOptions options(const std::string& work) const {
    return EngineOptions{test::tiny_profile(), 2, test::sync_of("disk"), dir_ / "store", dir_ / work, 2};
  }
  fs::path boot() const { return Store(dir_ / "store").update_dir(0); }

  /// The target as the harness materializes it for a protocol whose server prepares nothing.
  fs::path materialize(uint32_t version) {
    const fs::path dir = dir_ / ("materialized-" + std::to_string(version));
    if (!fs::exists(dir)) write_full_checkpoint(test::tiny_profile(), kSeed, version, std::nullopt, dir);
    return dir;
  }

  UpdateSpec spec(PauseMode pause) {
    UpdateSpec s;
    s.served = 0;
    s.target = kTarget;
    s.store = dir_ / "store";
    s.checkpoint_dir = materialize(kTarget);
    s.mode = SyncModeKind::Disk;
    s.pause = pause;
    return s;
  }

  HttpReply call(const HttpRequest& request) {
    for (const Route& route : routes_) {
      if (route.method == request.method && route.path == request.path) return route.handler(request);
    }
    ADD_FAILURE() << "no route for " << request.endpoint();
    return HttpReply{404, "application/json", "{}"};
  }

  /// The calls of one role of `calls`, each answered 200 and judged by the table.
  void run(const std::vector<CommitCall>& calls, CallRole role) {
    for (const CommitCall& c : calls) {
      if (c.role != role) continue;
      const HttpReply reply = call(c.request);
      ASSERT_EQ(reply.status, 200) << c.request.endpoint() << ": " << reply.body;
      if (protocol_->plain_text(c.request)) {
        EXPECT_EQ(reply.body, "") << c.request.endpoint();
      } else {
        protocol_->check_update_reply(c.request, json::parse(reply.body));
      }
    }
  }

  GenerateResult generate(const GenerateRequest& request) {
    const HttpReply reply = call(protocol_->generate(request));
    EXPECT_EQ(reply.status, 200) << reply.body;
    return protocol_->parse_generate(json::parse(reply.body));
  }

  WeightVersion version() {
    const HttpReply reply = call(protocol_->weight_version());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return protocol_->parse_weight_version(json::parse(reply.body));
  }

  RankChecksums checksums() {
    const HttpReply reply = call(*protocol_->checksums());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return protocol_->parse_checksums(json::parse(reply.body));
  }

  int checksums_status_while_paused() { return call(*protocol_->checksums()).status; }

  /// A fresh engine natively loaded at `version`: its storage checksums and the fingerprints of `requests`, taken
  /// over the text as a server sends it.
  std::pair<std::vector<std::map<std::string, std::string>>, std::vector<std::string>> native(
      uint32_t version, const std::vector<GenerateRequest>& requests) {
    Engine engine(options("native-" + std::to_string(version)));
    engine.load_native(version == 0 ? boot() : materialize(version), version);
    std::vector<std::string> prints;
    for (const auto& r : requests) {
      GenerateResponse response = engine.generate(r);
      // As a server sends it: bytes that are not UTF-8 arrive as U+FFFD (json_reply).
      response.text = json::parse(json_reply(200, json(response.text)).body).get<std::string>();
      prints.push_back(fingerprint(response));
    }
    return {engine.storage_checksums(), prints};
  }

  /// New tokens that take about kLongSeconds on this engine in this build.
  int long_tokens() {
    const std::vector<double> steps = engine_->generate(probe(16)).step_times;
    const double per_step = (steps.back() - steps.front()) / static_cast<double>(steps.size() - 1);
    return std::clamp(static_cast<int>(kLongSeconds / std::max(per_step, 1e-6)), 64, 20000);
  }

  /// Starts a long request through the routes and returns once it is decoding: a short request sent after it was
  /// accepted has finished, and every scheduler step that served the short one stepped the long one too.
  std::future<GenerateResult> start_long(int tokens) {
    auto long_request = std::async(std::launch::async, [this, tokens] { return generate(long_probe(tokens)); });
    EXPECT_TRUE(test::wait_until([&] { return engine_->debug_requests_held() >= 1; }, "the long request"));
    generate(probe());
    EXPECT_NE(long_request.wait_for(std::chrono::seconds(0)), std::future_status::ready)
        << "the long request finished before the pause: raise kLongSeconds";
    return long_request;
  }

  test::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ServeState> state_;
  std::vector<Route> routes_;
  std::unique_ptr<Protocol> protocol_;
};

TEST_F(VllmProtocol, TableDrivesDiskModeWithVllmPauseModes) {
  EXPECT_EQ(protocol_->name(), "vllm");
  EXPECT_EQ(protocol_->modes(), std::vector<SyncModeKind>{SyncModeKind::Disk});
  EXPECT_FALSE(protocol_->server_prepares(SyncModeKind::Disk));
  EXPECT_FALSE(protocol_->prepare(spec(PauseMode::Drain)).has_value());
  EXPECT_EQ(protocol_->default_pause_mode(), PauseMode::Drain);
  EXPECT_EQ(protocol_support(*protocol_, SyncModeKind::Disk, PauseMode::InPlace), "");
  EXPECT_NE(protocol_support(*protocol_, SyncModeKind::Disk, PauseMode::Retract), "");
  EXPECT_NE(protocol_support(*protocol_, SyncModeKind::Cpu, PauseMode::Drain), "");
  EXPECT_THROW(protocol_->commit(spec(PauseMode::Retract)), Error);
  UpdateSpec no_checkpoint = spec(PauseMode::Drain);
  no_checkpoint.checkpoint_dir.clear();
  EXPECT_THROW(protocol_->commit(no_checkpoint), Error);

  const std::vector<std::pair<PauseMode, std::string>> modes{
      {PauseMode::Drain, "wait"}, {PauseMode::InPlace, "keep"}, {PauseMode::Abort, "abort"}};
  for (const auto& [mode, value] : modes) {
    const auto calls = protocol_->commit(spec(mode));
    ASSERT_GE(calls.size(), 4u);
    const HttpRequest& pause = calls.front().request;
    EXPECT_EQ(calls.front().role, CallRole::Pause);
    EXPECT_EQ(pause.endpoint(), "POST /pause");
    EXPECT_EQ(pause.query, (std::vector<std::pair<std::string, std::string>>{{"mode", value}}));
    EXPECT_FALSE(pause.body.has_value()) << "vLLM's /pause takes query parameters, not JSON";
    EXPECT_EQ(calls.back().role, CallRole::Continue);
    EXPECT_EQ(calls.back().request.endpoint(), "POST /resume");
    const HttpRequest& reload = calls[1].request;
    EXPECT_EQ(reload.endpoint(), "POST /collective_rpc");
    EXPECT_EQ(*reload.body, (json{{"method", "reload_weights"},
                                  {"kwargs", {{"weights_path", fs::absolute(materialize(kTarget)).string()}}}}));
    EXPECT_EQ(calls[2].request.endpoint(), "POST /update_weight_version");
    EXPECT_EQ(*calls[2].request.body, (json{{"new_version", "2"}}));
    // Only keep leaves the prefix cache as it was (the pause clears it otherwise).
    const bool resets = calls[3].request.path == "/reset_prefix_cache";
    EXPECT_EQ(resets, mode == PauseMode::InPlace);
    EXPECT_EQ(vllm::pause_mode_of(value), mode);
  }

  const HttpRequest gen = protocol_->generate(probe());
  EXPECT_EQ(gen.endpoint(), "POST /v1/completions");
  EXPECT_TRUE(gen.extras);
  EXPECT_EQ(*gen.body, (json{{"prompt", tokenize_bytes("probe")}, {"max_tokens", 6}, {"temperature", 0},
                             {"ignore_eos", true}, {"return_token_ids", true}, {"logprobs", 1}}));
  EXPECT_EQ(protocol_->weight_version().endpoint(), "GET /weight_info");
  EXPECT_EQ(protocol_->checksums()->endpoint(), "POST /weight_checker");
  EXPECT_EQ(protocol_->health().endpoint(), "GET /health");
}

TEST_F(VllmProtocol, ChecksumKeysSplitByTensorParallelRank) {
  auto a = vllm::split_checksum_key("dp0:pp0:pcp0:tp1:model.layers.0.mlp.w");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tp, 1);
  EXPECT_EQ(a->name, "model.layers.0.mlp.w");
  auto b = vllm::split_checksum_key("dp0:pp1:pcp0:tp0:ep0:lm_head.weight");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->tp, 0);
  EXPECT_EQ(b->name, "pp1:lm_head.weight");
  auto c = vllm::split_checksum_key("dp0:pp0:pcp0:tp3:ep0:a:b");  // a colon inside the tensor name
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "a:b");
  EXPECT_FALSE(vllm::split_checksum_key("lm_head.weight"));
  // The first weight checker's keys are bare parameter names: rank 0's.
  const RankChecksums bare = protocol_->parse_checksums(json{{"checksums", {{"lm_head.weight", "ab"}}}});
  ASSERT_EQ(bare.ranks.size(), 1u);
  EXPECT_EQ(bare.ranks[0].at("lm_head.weight"), "ab");
  EXPECT_THROW(protocol_->parse_checksums(json{{"checksums", {{"dp0:pp0:lm_head.weight", "ab"}}}}), Error);
}

TEST_F(VllmProtocol, FullUpdateEndsAtTargetWithNativeStorages) {
  const auto [v0_checksums, v0_prints] = native(0, {probe()});
  const auto [v2_checksums, v2_prints] = native(kTarget, {probe()});
  ASSERT_NE(v0_checksums, v2_checksums);
  EXPECT_TRUE(version().is(0));
  EXPECT_EQ(checksums().ranks, v0_checksums);
  const GenerateResult before = generate(probe());
  EXPECT_EQ(fingerprint(before.response), v0_prints[0]);
  EXPECT_TRUE(before.version.is(0));

  const auto calls = protocol_->commit(spec(PauseMode::Drain));
  run(calls, CallRole::Pause);
  EXPECT_TRUE(engine_->paused());
  run(calls, CallRole::Commit);
  EXPECT_EQ(checksums_status_while_paused(), 409);
  run(calls, CallRole::Continue);
  EXPECT_FALSE(engine_->paused());

  EXPECT_TRUE(version().is(kTarget)) << version().text;
  EXPECT_EQ(version().text, "2");
  const RankChecksums after = checksums();
  EXPECT_EQ(after.ranks, v2_checksums);
  EXPECT_FALSE(after.basis.empty());
  const double sent = steady_seconds();
  const GenerateResult answer = generate(probe());
  // The decode steps, back on this process's clock after the trip through the host's.
  ASSERT_FALSE(answer.response.step_times.empty());
  EXPECT_GE(answer.response.step_times.front(), sent - 1e-6);
  EXPECT_LE(answer.response.step_times.back(), steady_seconds() + 1e-6);
  EXPECT_EQ(fingerprint(answer.response), v2_prints[0]);
  EXPECT_EQ(answer.version.text, "2");
  ASSERT_EQ(answer.step_versions.size(), answer.response.step_times.size());  // one per step
  for (const auto& v : answer.step_versions) EXPECT_EQ(v.text, "2");
  EXPECT_EQ(answer.response.logprobs.size(), answer.response.output_ids.size());
  EXPECT_FALSE(answer.response.step_times.empty());

  // The gate's closed time, measured by the engine from /pause to /resume.
  const LastUpdate last = state_->last_update();
  ASSERT_TRUE(last.commit.has_value());
  ASSERT_TRUE(last.commit->pause_seconds.has_value());
  EXPECT_GT(*last.commit->pause_seconds, 0);
}

TEST_F(VllmProtocol, KeepContinuesRequestsInPlaceAcrossVersions) {
  const int tokens = long_tokens();
  auto long_request = start_long(tokens);
  const auto calls = protocol_->commit(spec(PauseMode::InPlace));
  run(calls, CallRole::Pause);
  run(calls, CallRole::Commit);
  run(calls, CallRole::Continue);
  const GenerateResult held = long_request.get();
  EXPECT_EQ(held.response.finish_reason, "length");
  EXPECT_EQ(held.response.restarts, 0);
  EXPECT_EQ(held.response.output_ids.size(), static_cast<size_t>(tokens));
  ASSERT_EQ(held.step_versions.size(), held.response.step_times.size());  // one per step, prompt steps first
  // The steps run before the pause at 0, the rest on the new weights with the KV they had.
  EXPECT_EQ(held.step_versions.front().text, "0");
  EXPECT_EQ(held.step_versions.back().text, "2");
  const auto first_new = std::find_if(held.step_versions.begin(), held.step_versions.end(),
                                      [](const WeightVersion& v) { return v.text == "2"; });
  EXPECT_TRUE(std::all_of(first_new, held.step_versions.end(), [](const WeightVersion& v) { return v.text == "2"; }));
  EXPECT_EQ(held.version.text, "2");
  EXPECT_TRUE(version().is(kTarget));
}

TEST_F(VllmProtocol, AbortEndsRequestsInFlight) {
  auto long_request = start_long(long_tokens());
  const auto calls = protocol_->commit(spec(PauseMode::Abort));
  run(calls, CallRole::Pause);
  const GenerateResult aborted = long_request.get();  // answered by the pause itself
  EXPECT_EQ(aborted.response.finish_reason, "abort");
  EXPECT_FALSE(aborted.response.output_ids.empty());
  for (const auto& v : aborted.step_versions) EXPECT_EQ(v.text, "0");
  run(calls, CallRole::Commit);
  run(calls, CallRole::Continue);
  const auto [v2_checksums, v2_prints] = native(kTarget, {probe()});
  EXPECT_EQ(fingerprint(generate(probe()).response), v2_prints[0]);
}

TEST_F(VllmProtocol, WaitDrainsThenHoldsNewRequestsForTheTarget) {
  const int tokens = long_tokens();
  const auto [v0_checksums, v0_prints] = native(0, {long_probe(tokens)});
  const auto [v2_checksums, v2_prints] = native(kTarget, {probe()});
  auto long_request = start_long(tokens);
  const auto calls = protocol_->commit(spec(PauseMode::Drain));
  run(calls, CallRole::Pause);  // returns once the request in flight finished
  const double paused_at = steady_seconds();
  const GenerateResult drained = long_request.get();
  ASSERT_FALSE(drained.response.step_times.empty());
  EXPECT_LT(drained.response.step_times.back(), paused_at) << "a decode step after /pause?mode=wait returned";
  EXPECT_EQ(drained.response.finish_reason, "length");
  EXPECT_EQ(fingerprint(drained.response), v0_prints[0]);
  for (const auto& v : drained.step_versions) EXPECT_EQ(v.text, "0");
  // Sent while paused: held until /resume, answered on the target.
  auto during = std::async(std::launch::async, [this] { return generate(probe()); });
  ASSERT_TRUE(test::wait_until([&] { return engine_->debug_requests_held() == 1; }, "the request sent in the pause"));
  run(calls, CallRole::Commit);
  EXPECT_NE(during.wait_for(std::chrono::milliseconds(20)), std::future_status::ready);
  run(calls, CallRole::Continue);
  const GenerateResult answered = during.get();
  EXPECT_EQ(fingerprint(answered.response), v2_prints[0]);
  EXPECT_EQ(answered.version.text, "2");
}

TEST_F(VllmProtocol, ReloadWithoutPauseRunsInPlaceAndKeepsTheReportedVersion) {
  const HttpReply reload = call(HttpRequest{
      "POST", "/collective_rpc", {},
      json{{"method", "reload_weights"}, {"kwargs", {{"weights_path", materialize(kTarget).string()}}}}});
  ASSERT_EQ(reload.status, 200) << reload.body;
  EXPECT_EQ(json::parse(reload.body), (json{{"results", {nullptr, nullptr}}}));  // one per worker (TP 2)
  // vLLM moves the reported version only when told.
  EXPECT_EQ(version().text, "0");
  const auto [v2_checksums, v2_prints] = native(kTarget, {probe()});
  EXPECT_EQ(checksums().ranks, v2_checksums);
  const HttpReply set = call(HttpRequest{"POST", "/update_weight_version", {}, json{{"new_version", "policy-2"}}});
  ASSERT_EQ(set.status, 200);
  EXPECT_EQ(json::parse(set.body), (json{{"success", true}, {"new_version", "policy-2"}}));
  EXPECT_EQ(version().text, "policy-2");
  EXPECT_EQ(generate(probe()).version.text, "policy-2");
  ASSERT_TRUE(state_->last_update().commit.has_value());
  EXPECT_TRUE(state_->last_update().commit->pause_seconds.has_value());
}

TEST_F(VllmProtocol, WeightTransferSessionReloadsFromAPath) {
  EXPECT_EQ(call(HttpRequest{"POST", "/init_weight_transfer_engine", {}, json{{"init_info", json::object()}}}).status,
            200);
  ASSERT_EQ(call(HttpRequest{"POST", "/pause", {{"mode", "wait"}}, std::nullopt}).status, 200);
  ASSERT_EQ(call(HttpRequest{"POST", "/start_weight_update", {}, std::nullopt}).status, 200);
  const HttpReply update = call(HttpRequest{"POST", "/update_weights", {},
                                            json{{"update_info", {{"path", materialize(kTarget).string()}}}}});
  ASSERT_EQ(update.status, 200) << update.body;
  EXPECT_EQ(json::parse(update.body), (json{{"message", "Weights updated"}}));
  const HttpReply finish = call(HttpRequest{"POST", "/finish_weight_update", {}, json{{"weight_version", "2"}}});
  ASSERT_EQ(finish.status, 200) << finish.body;
  ASSERT_EQ(call(HttpRequest{"POST", "/resume", {}, std::nullopt}).status, 200);
  EXPECT_TRUE(version().is(kTarget));
  const auto [v2_checksums, v2_prints] = native(kTarget, {probe()});
  EXPECT_EQ(checksums().ranks, v2_checksums);
  // A finish without a session, as the backend refuses it.
  EXPECT_EQ(call(HttpRequest{"POST", "/finish_weight_update", {}, json::object()}).status, 500);
}

TEST_F(VllmProtocol, RefusalsCarryVllmStatusAndErrorShape) {
  const auto error_of = [](const HttpReply& r) { return json::parse(r.body).at("error"); };
  // HTTPException details (400, status phrase, param null).
  const HttpReply no_info = call(HttpRequest{"POST", "/update_weights", {}, json::object()});
  EXPECT_EQ(no_info.status, 400);
  EXPECT_EQ(json::parse(no_info.body), (json{{"error",
                                              {{"message", "Missing 'update_info' in request body"},
                                               {"type", "Bad Request"},
                                               {"param", nullptr},
                                               {"code", 400}}}}));
  const HttpReply no_method = call(HttpRequest{"POST", "/collective_rpc", {}, json{{"kwargs", json::object()}}});
  EXPECT_EQ(no_method.status, 400);
  EXPECT_EQ(error_of(no_method).at("message"), "Missing 'method' in request body");
  const HttpReply no_init = call(HttpRequest{"POST", "/init_weight_transfer_engine", {}, json::object()});
  EXPECT_EQ(no_init.status, 400);
  EXPECT_EQ(error_of(no_init).at("message"), "Missing 'init_info' in request body");
  // Request validation (400, param names the field).
  const HttpReply no_version = call(HttpRequest{"POST", "/update_weight_version", {}, json::object()});
  EXPECT_EQ(no_version.status, 400);
  EXPECT_EQ(error_of(no_version).at("param"), "body.new_version");
  EXPECT_EQ(error_of(no_version).at("message").get<std::string>().rfind("1 validation error:", 0), 0u);
  const HttpReply int_version = call(HttpRequest{"POST", "/update_weight_version", {}, json{{"new_version", 2}}});
  EXPECT_EQ(int_version.status, 400);
  const HttpReply bad_mode = call(HttpRequest{"POST", "/pause", {{"mode", "in_place"}}, std::nullopt});
  EXPECT_EQ(bad_mode.status, 400);
  EXPECT_EQ(error_of(bad_mode).at("param"), "query.mode");
  EXPECT_FALSE(engine_->paused());
  const HttpReply bad_bool = call(HttpRequest{"POST", "/reset_prefix_cache", {{"reset_external", "maybe"}}, std::nullopt});
  EXPECT_EQ(bad_bool.status, 400);
  const HttpReply bad_action = call(HttpRequest{"POST", "/weight_checker", {}, json{{"action", "hash"}}});
  EXPECT_EQ(bad_action.status, 400);
  EXPECT_EQ(error_of(bad_action).at("message"), "action must be one of checksum|reset|compare, got 'hash'");
  // Sampling: vLLM's default temperature is 1.0; the embedded engine decodes greedily only.
  HttpRequest sampled = protocol_->generate(probe());
  sampled.body->erase("temperature");
  EXPECT_EQ(call(sampled).status, 400);

  // A reload of a checkpoint that lacks a tensor changes nothing.
  const auto before = checksums().ranks;
  const fs::path broken = dir_ / "broken";
  fs::copy(materialize(kTarget), broken);
  const auto index = read_checkpoint_index(broken / kIndexFileName);
  fs::remove(broken / index.weight_map.begin()->second);
  const HttpReply failed = call(HttpRequest{"POST", "/collective_rpc", {},
                                            json{{"method", "reload_weights"},
                                                 {"kwargs", {{"weights_path", broken.string()}}}}});
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(error_of(failed).at("code"), 500);
  EXPECT_TRUE(engine_->healthy());
  EXPECT_EQ(checksums().ranks, before);
  EXPECT_TRUE(version().is(0));
}

TEST_F(VllmProtocol, AServerBootedWithoutAVersionReportsNullUntilOneIsSet) {
  ServeState state(*engine_, WeightVersion::parse("default"), boot(), dir_ / "serve-default");
  const std::vector<Route> routes = vllm_routes(state);
  const auto answer = [&](const HttpRequest& r) {
    for (const Route& route : routes) {
      if (route.method == r.method && route.path == r.path) return route.handler(r);
    }
    ADD_FAILURE() << "no route for " << r.endpoint();
    return HttpReply{};
  };
  const json reply = json::parse(answer(protocol_->weight_version()).body);
  EXPECT_EQ(reply, (json{{"weight_version", nullptr}}));
  EXPECT_TRUE(protocol_->parse_weight_version(reply).is_default());
  answer(HttpRequest{"POST", "/update_weight_version", {}, json{{"new_version", "0"}}});
  EXPECT_EQ(json::parse(answer(protocol_->weight_version()).body), (json{{"weight_version", "0"}}));
}

TEST_F(VllmProtocol, PauseAndResumeAnswerAsVllm) {
  EXPECT_EQ(json::parse(call(HttpRequest{"GET", "/is_paused", {}, std::nullopt}).body), (json{{"is_paused", false}}));
  const HttpReply paused = call(HttpRequest{"POST", "/pause", {{"mode", "keep"}}, std::nullopt});
  EXPECT_EQ(json::parse(paused.body), (json{{"status", "paused"}}));
  EXPECT_EQ(state_->pause_mode(), PauseMode::InPlace);
  // A second pause keeps the first one.
  EXPECT_EQ(call(HttpRequest{"POST", "/pause", {{"mode", "abort"}}, std::nullopt}).status, 200);
  EXPECT_EQ(state_->pause_mode(), PauseMode::InPlace);
  EXPECT_EQ(json::parse(call(HttpRequest{"GET", "/is_paused", {}, std::nullopt}).body), (json{{"is_paused", true}}));
  const HttpReply resumed = call(HttpRequest{"POST", "/resume", {}, std::nullopt});
  EXPECT_EQ(json::parse(resumed.body), (json{{"status", "resumed"}}));
  EXPECT_FALSE(engine_->paused());
  EXPECT_FALSE(state_->last_update().commit.has_value()) << "no reload in that pause: nothing to record";
  EXPECT_EQ(call(HttpRequest{"POST", "/resume", {}, std::nullopt}).status, 200);
  const HttpReply health = call(protocol_->health());
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "");
}


// Every request the table builds conforms to the recorded vLLM fixtures: body fields, types, enums and required
// fields; query parameters declared with their values in range.
TEST_F(VllmProtocol, EveryRequestConformsToTheRecordedFixtures) {
  std::vector<HttpRequest> requests{protocol_->generate(probe()), protocol_->weight_version(), *protocol_->checksums(),
                                    protocol_->health()};
  for (PauseMode mode : protocol_->pause_modes()) {
    for (const CommitCall& c : protocol_->commit(spec(mode))) requests.push_back(c.request);
  }
  for (const HttpRequest& r : requests) {
    std::string file = r.path.substr(1);
    std::replace(file.begin(), file.end(), '/', '_');
    const json fixture = test::load_protocol_fixture("vllm", file);
    const json methods = fixture.value("methods", json::array({fixture.at("method")}));
    EXPECT_NE(std::find(methods.begin(), methods.end(), json(r.method)), methods.end()) << r.endpoint();
    const json table = fixture.value("request", json());
    if (table.is_null()) {
      EXPECT_FALSE(r.body.has_value()) << r.endpoint() << " takes no body";
    } else {
      ASSERT_TRUE(r.body.has_value()) << r.endpoint();
      EXPECT_EQ(test::field_violations(table, *r.body), std::vector<std::string>{}) << r.endpoint();
    }
    const json query = fixture.value("query", json::object());
    const json enums = fixture.value("query_enums", json::object());
    for (const auto& [key, value] : r.query) {
      EXPECT_TRUE(query.is_object() && query.contains(key)) << r.endpoint() << " query " << key;
      if (enums.is_object() && enums.contains(key)) {
        const json& allowed = enums.at(key);
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), json(value)), allowed.end())
            << r.endpoint() << " query " << key << "=" << value;
      }
    }
  }
}

// Every answer of the routes, through a whole update, has the recorded response's fields and types (the wsbench
// extras aside, which only a request with the extras header gets).
TEST_F(VllmProtocol, EveryAnswerConformsToTheRecordedFixtures) {
  const auto check = [&](const HttpRequest& r) {
    const HttpReply reply = call(r);
    std::string file = r.path.substr(1);
    std::replace(file.begin(), file.end(), '/', '_');
    const json expected = test::load_protocol_fixture("vllm", file).at("response");
    EXPECT_EQ(reply.status, expected.at("status").get<int>()) << r.endpoint() << ": " << reply.body;
    if (expected.value("empty", false)) {
      EXPECT_EQ(reply.body, "") << r.endpoint();
      return;
    }
    EXPECT_EQ(test::field_violations(expected, json::parse(reply.body)), std::vector<std::string>{})
        << r.endpoint() << ": " << reply.body;
  };
  HttpRequest completion = protocol_->generate(probe());
  completion.extras = false;
  check(completion);
  check(protocol_->weight_version());
  check(*protocol_->checksums());
  check(protocol_->health());
  check(HttpRequest{"GET", "/is_paused", {}, std::nullopt});
  for (const CommitCall& c : protocol_->commit(spec(PauseMode::InPlace))) check(c.request);
  check(HttpRequest{"POST", "/init_weight_transfer_engine", {}, json{{"init_info", json::object()}}});
  check(HttpRequest{"POST", "/start_weight_update", {}, std::nullopt});
  check(HttpRequest{"POST", "/update_weights", {}, json{{"update_info", {{"path", materialize(kTarget).string()}}}}});
  check(HttpRequest{"POST", "/finish_weight_update", {}, json{{"weight_version", "2"}}});
  check(protocol_->weight_version());
  check(completion);
}
}  // namespace
}  // namespace wsb
