// The `sglang` protocol end to end in process: the client table's requests answered by wsbench serve's sglang
// routes over an embedded engine, the answers parsed back by the table. Every pause mode updates to the target with
// checksums equal to a fresh native load; in_place spans a request over the commit, abort ends it, drain waits for
// it; refusals change nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "engine_api/protocols/sglang_family.hpp"
#include "engine_api/protocols/torch_pickle.hpp"
#include "core/phase_log.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/protocol_server.hpp"
#include "tests/support/wait_until.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;
using test::ProtocolServer;

constexpr uint32_t kTarget = 3;

/// The fingerprint of `r` as a client sees it over JSON: bytes of the text that are not UTF-8 arrive as U+FFFD.
std::string wire_fingerprint(const GenerateResponse& r) {
  const std::string text =
      json::parse(json(r.text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  return fingerprint(r.output_ids, text, r.logprobs);
}

GenerateRequest probe(int tokens = 6) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("sglang probe");
  r.max_new_tokens = tokens;
  return r;
}

class SglangUpdate : public ::testing::TestWithParam<PauseMode> {};

TEST_P(SglangUpdate, ReachesTheTargetWithTheChecksumsOfANativeLoad) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  EXPECT_TRUE(driver.weight_version().is_default());
  const UpdateSpec spec = server.spec(0, kTarget, SyncModeKind::Disk, GetParam());
  EXPECT_FALSE(server.protocol().prepare(spec));
  const auto calls = server.protocol().commit(spec);
  ASSERT_EQ(calls.size(), GetParam() == PauseMode::Drain ? 1u : 3u);
  driver.run_commit(calls);

  const WeightVersion served = driver.weight_version();
  EXPECT_EQ(served.text, "3");
  EXPECT_TRUE(served.is(kTarget));
  EXPECT_EQ(driver.checksums().ranks, server.native_checksums(kTarget));
  const GenerateResult after = driver.generate(probe());
  EXPECT_EQ(after.version.text, "3");
  EXPECT_EQ(after.response.finish_reason, "length");
  const LastUpdate last = server.state().last_update();
  ASSERT_TRUE(last.commit);
  ASSERT_TRUE(last.commit->pause_seconds);
  EXPECT_GT(*last.commit->pause_seconds, 0.0);
  EXPECT_FALSE(server.engine().paused());
}

INSTANTIATE_TEST_SUITE_P(PauseModes, SglangUpdate,
                         ::testing::Values(PauseMode::Drain, PauseMode::Retract, PauseMode::InPlace, PauseMode::Abort),
                         [](const auto& info) { return std::string(name_of(info.param)); });

constexpr uint64_t kBucketBytes = 131072;  // several buckets of the tiny model

class SglangRefit : public ::testing::TestWithParam<PauseMode> {};

TEST_P(SglangRefit, StreamsTheTargetInBucketsToTheChecksumsOfANativeLoad) {
  ProtocolServer server("sglang", SyncModeKind::Disk);  // serve runs disk mode under a harness-side prepare
  const auto& driver = server.driver();
  const UpdateSpec spec = server.spec(0, kTarget, SyncModeKind::Refit, GetParam(), kBucketBytes);
  EXPECT_FALSE(server.protocol().server_prepares(SyncModeKind::Refit));
  const auto calls = server.protocol().commit(spec);
  driver.run_commit(calls);
  EXPECT_EQ(driver.weight_version().text, "3");
  EXPECT_EQ(driver.checksums().ranks, server.native_checksums(kTarget));
  EXPECT_EQ(driver.generate(probe()).version.text, "3");
  const LastUpdate last = server.state().last_update();
  ASSERT_TRUE(last.commit && last.commit->pause_seconds);
  EXPECT_FALSE(server.engine().paused());
}

INSTANTIATE_TEST_SUITE_P(PauseModes, SglangRefit,
                         ::testing::Values(PauseMode::Drain, PauseMode::Retract, PauseMode::InPlace, PauseMode::Abort),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(SglangProtocol, RefitBucketsCarryOnePayloadPerRankAndTheVersionLast) {
  ProtocolServer server("sglang", SyncModeKind::Disk);  // serve runs disk mode under a harness-side prepare
  const auto calls = server.protocol().commit(server.spec(0, 2, SyncModeKind::Refit, PauseMode::Drain, kBucketBytes));
  ASSERT_GT(calls.size(), 2u);
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& body = *calls[i].request.body;
    EXPECT_EQ(calls[i].request.path, "/update_weights_from_tensor");
    ASSERT_EQ(body["serialized_named_tensors"].size(), 2u);
    EXPECT_EQ(body["serialized_named_tensors"][0], body["serialized_named_tensors"][1]);
    const bool last = i + 1 == calls.size();
    EXPECT_EQ(body["flush_cache"], last);
    EXPECT_EQ(body.contains("weight_version"), last);
  }
  EXPECT_EQ((*calls.back().request.body)["weight_version"], "2");
  const auto in_place =
      server.protocol().commit(server.spec(0, 2, SyncModeKind::Refit, PauseMode::InPlace, kBucketBytes));
  EXPECT_EQ((*in_place[in_place.size() - 2].request.body)["flush_cache"], false);

  // Until the last bucket the weights stay: the engine holds the buckets and commits the complete set.
  const auto& driver = server.driver();
  const auto before = server.engine().storage_checksums();
  for (size_t i = 0; i + 1 < calls.size(); ++i) driver.run_update(calls[i].request);
  EXPECT_EQ(server.engine().storage_checksums(), before);
  EXPECT_TRUE(driver.weight_version().is_default());
  driver.run_update(calls.back().request);
  EXPECT_EQ(driver.weight_version().text, "2");
  EXPECT_EQ(driver.checksums().ranks, server.native_checksums(2));
}

TEST(SglangProtocol, RefitRefusesPayloadsTheEngineCannotLoad) {
  ProtocolServer server("sglang", SyncModeKind::Disk);  // serve runs disk mode under a harness-side prepare
  const auto& driver = server.driver();
  const auto before = server.engine().storage_checksums();
  const auto calls = server.protocol().commit(server.spec(0, 2, SyncModeKind::Refit, PauseMode::Drain, kBucketBytes));
  auto with = [&](const std::function<void(json&)>& edit) {
    HttpRequest r = calls.front().request;
    edit(*r.body);
    return driver.json_of(r, 400);
  };
  EXPECT_NE(with([](json& b) { b["serialized_named_tensors"][1] = "AAAA"; })["message"].get<std::string>().find(
                "serialized_named_tensors[1] differs from [0]"),
            std::string::npos);
  EXPECT_NE(
      with([](json& b) { b["serialized_named_tensors"] = json::array({b["serialized_named_tensors"][0]}); })["message"]
          .get<std::string>()
          .find("1 entries for 2 TP ranks"),
      std::string::npos);
  EXPECT_NE(with([](json& b) {
              b["serialized_named_tensors"] = json::array({"not base64!", "not base64!"});
            })["message"]
                .get<std::string>()
                .find("Failed to update weights: "),
            std::string::npos);
  EXPECT_NE(with([](json& b) { b["load_format"] = "flattened_bucket"; })["message"].get<std::string>().find(
                "not 'flattened_bucket'"),
            std::string::npos);
  // A tensor the model does not have.
  const std::string pickle = torch_pickle::encode({{"model.nope.weight", DType::BF16, {2}, {0, 0, 0, 0}}});
  const std::string b64 = torch_pickle::base64_encode({reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size()});
  EXPECT_NE(with([&](json& b) {
              b["serialized_named_tensors"] = json::array({b64, b64});
            })["message"]
                .get<std::string>()
                .find("'model.nope.weight' is not a tensor of the model"),
            std::string::npos);
  EXPECT_EQ(server.engine().storage_checksums(), before);
  EXPECT_TRUE(driver.weight_version().is_default());
}

TEST(SglangProtocol, CommitBodiesFollowTheUpstreamClient) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto in_place = server.protocol().commit(server.spec(0, 2, SyncModeKind::Disk, PauseMode::InPlace));
  ASSERT_EQ(in_place.size(), 3u);
  EXPECT_EQ(in_place[0].request.path, "/pause_generation");
  EXPECT_EQ(*in_place[0].request.body, (json{{"mode", "in_place"}}));
  EXPECT_EQ(in_place[1].request.path, "/update_weights_from_disk");
  EXPECT_EQ(
      *in_place[1].request.body,
      (json{{"model_path", server.full_checkpoint(2).string()}, {"weight_version", "2"}, {"flush_cache", false}}));
  EXPECT_EQ(in_place[2].request.path, "/continue_generation");
  EXPECT_EQ(*in_place[2].request.body, json::object());
  const auto drain = server.protocol().commit(server.spec(0, 2, SyncModeKind::Disk, PauseMode::Drain));
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ((*drain[0].request.body)["flush_cache"], true);
  const HttpRequest gen = server.protocol().generate(probe(4));
  EXPECT_TRUE(gen.extras);
  EXPECT_EQ(*gen.body, (json{{"input_ids", probe().input_ids},
                             {"sampling_params", {{"temperature", 0}, {"max_new_tokens", 4}, {"ignore_eos", true}}},
                             {"return_logprob", true},
                             {"logprob_start_len", -1}}));
}

TEST(SglangProtocol, GenerateAnswersAsTheEngineWithExtrasOnlyWhenAsked) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const GenerateResponse direct = server.engine().generate(probe());
  const GenerateResult served = server.driver().generate(probe());
  EXPECT_EQ(fingerprint(served.response), wire_fingerprint(direct));
  EXPECT_TRUE(served.version.is_default());
  EXPECT_EQ(served.step_versions.size(), direct.step_versions.size());
  EXPECT_EQ(served.response.step_times.size(), direct.step_times.size());

  HttpRequest plain = server.protocol().generate(probe());
  plain.extras = false;
  const json reply = server.driver().json_of(plain);
  EXPECT_FALSE(reply["meta_info"].contains("wsbench_step_times"));
  EXPECT_EQ(reply["meta_info"]["finish_reason"], (json{{"type", "length"}, {"length", 6}}));
  EXPECT_EQ(reply["meta_info"]["weight_version"], "default");
  EXPECT_EQ(reply["meta_info"]["input_token_logprobs"], json::array());
  ASSERT_EQ(reply["meta_info"]["output_token_logprobs"].size(), 6u);
  EXPECT_TRUE(reply["meta_info"]["output_token_logprobs"][0][2].is_null());
  const GenerateResult parsed = server.protocol().parse_generate(reply);
  EXPECT_TRUE(parsed.step_versions.empty());
  EXPECT_EQ(fingerprint(parsed.response), wire_fingerprint(direct));
}

TEST(SglangProtocol, InPlaceLetsARequestSpanTheCommit) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  auto request = std::async(std::launch::async, [&] { return driver.generate(probe(3000)); });
  ASSERT_TRUE(test::wait_until([&] { return server.engine().debug_requests_held() > 0; }, "the request in flight"));
  // Some tokens before the pause (a decode step takes well under a millisecond; the request needs thousands).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  driver.run_commit(server.protocol().commit(server.spec(0, kTarget, SyncModeKind::Disk, PauseMode::InPlace)));
  const GenerateResult result = request.get();
  ASSERT_FALSE(result.step_versions.empty());
  EXPECT_TRUE(result.step_versions.front().is_default());
  EXPECT_EQ(result.step_versions.back().text, "3");
  EXPECT_EQ(result.version.text, "3");
  EXPECT_EQ(result.response.finish_reason, "length");
  EXPECT_EQ(result.response.restarts, 0);
}

TEST(SglangProtocol, AbortEndsTheRequestInFlight) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  auto request = std::async(std::launch::async, [&] { return driver.generate(probe(3000)); });
  ASSERT_TRUE(test::wait_until([&] { return server.engine().debug_requests_held() > 0; }, "the request in flight"));
  driver.run_commit(server.protocol().commit(server.spec(0, kTarget, SyncModeKind::Disk, PauseMode::Abort)));
  const GenerateResult result = request.get();
  EXPECT_EQ(result.response.finish_reason, "abort");
  EXPECT_LT(result.response.output_ids.size(), 3000u);
  EXPECT_EQ(driver.weight_version().text, "3");
}

TEST(SglangProtocol, AnUnpausedCommitWaitsForTheRequestInFlight) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  auto request = std::async(std::launch::async, [&] { return driver.generate(probe(1500)); });
  ASSERT_TRUE(test::wait_until([&] { return server.engine().debug_requests_held() > 0; }, "the request in flight"));
  const double asked = steady_seconds();
  driver.run_commit(server.protocol().commit(server.spec(0, kTarget, SyncModeKind::Disk, PauseMode::Drain)));
  const double committed = steady_seconds();
  const GenerateResult result = request.get();
  // Every token came from the old weights, and the last one before the commit ended.
  ASSERT_EQ(result.response.output_ids.size(), 1500u);
  EXPECT_GT(result.response.step_times.back(), asked);
  EXPECT_LE(result.response.step_times.back(), committed);
  EXPECT_EQ(result.response.restarts, 0);
  EXPECT_TRUE(result.version.is_default());
  for (const auto& v : result.step_versions) EXPECT_TRUE(v.is_default());
  const LastUpdate last = server.state().last_update();
  ASSERT_TRUE(last.commit);
  EXPECT_LE(result.response.step_times.back(), committed - last.commit->seconds);
  EXPECT_EQ(driver.weight_version().text, "3");
}

TEST(SglangProtocol, RefusalsChangeNothing) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  const auto before = server.engine().storage_checksums();

  HttpRequest missing{"POST",
                      "/update_weights_from_disk",
                      {},
                      json{{"model_path", (server.dir() / "nowhere").string()}, {"weight_version", "1"}}};
  const json refused = driver.json_of(missing, 400);
  EXPECT_EQ(refused["success"], false);
  EXPECT_EQ(refused["num_paused_requests"], 0);
  EXPECT_TRUE(refused["message"].get<std::string>().starts_with("Failed to get weights iterator: ")) << refused;
  test::expect_error([&] { driver.run_update(missing); }, ErrorKind::State, {"Failed to get weights iterator"});

  HttpRequest no_path{"POST", "/update_weights_from_disk", {}, json{{"weight_version", "1"}}};
  const json invalid = driver.json_of(no_path, 400);
  EXPECT_EQ(invalid["object"], "error");
  EXPECT_EQ(invalid["code"], 400);
  EXPECT_NE(invalid["message"].get<std::string>().find("'loc': ('body', 'model_path'), 'msg': 'Field required'"),
            std::string::npos)
      << invalid;
  const json bad_mode = driver.json_of(HttpRequest{"POST", "/pause_generation", {}, json{{"mode", "drain"}}}, 400);
  EXPECT_NE(bad_mode["message"].get<std::string>().find("Input should be 'abort', 'retract' or 'in_place'"),
            std::string::npos)
      << bad_mode;
  EXPECT_FALSE(server.engine().paused());

  // flush_cache true under an in_place pause that holds a request trips SGLang's assertion.
  auto request = std::async(std::launch::async, [&] { return driver.generate(probe(3000)); });
  ASSERT_TRUE(test::wait_until([&] { return server.engine().debug_requests_held() > 0; }, "the request in flight"));
  driver.run_update(sglang::pause_request(PauseMode::InPlace));
  HttpRequest flushing{"POST",
                       "/update_weights_from_disk",
                       {},
                       json{{"model_path", server.full_checkpoint(1).string()}, {"flush_cache", true}}};
  const HttpReply tripped = driver.send(flushing);
  EXPECT_EQ(tripped.status, 500) << tripped.body;
  EXPECT_EQ(driver.send(HttpRequest{"POST", "/flush_cache", {}, std::nullopt}).body, "Flush cache failed.\n");
  driver.run_update(sglang::continue_request());
  EXPECT_EQ(request.get().response.finish_reason, "length");

  EXPECT_EQ(server.engine().storage_checksums(), before);
  EXPECT_TRUE(driver.weight_version().is_default());
  EXPECT_TRUE(server.engine().healthy());
  const HttpReply flushed = driver.send(HttpRequest{"GET", "/flush_cache", {}, std::nullopt});
  EXPECT_EQ(flushed.status, 200);
  EXPECT_EQ(flushed.content_type, "text/plain");
  EXPECT_TRUE(flushed.body.starts_with("Cache flushed.\n"));
}

TEST(SglangProtocol, ANullVersionKeepsTheServedTextAndChecksumsFollowTheWireShape) {
  ProtocolServer server("sglang", SyncModeKind::Disk);
  const auto& driver = server.driver();
  driver.run_update(
      HttpRequest{"POST", "/update_weights_from_disk", {}, json{{"model_path", server.full_checkpoint(2).string()}}});
  EXPECT_TRUE(driver.weight_version().is_default());
  EXPECT_EQ(driver.checksums().ranks, server.native_checksums(2));
  const json info = driver.json_of(HttpRequest{"GET", "/model_info", {}, std::nullopt});
  EXPECT_EQ(info["model_path"], server.full_checkpoint(2).string());
  EXPECT_EQ(info["model_type"], "llama");
  const json sums = driver.json_of(HttpRequest{"GET", "/weights_checker", {}, std::nullopt});
  EXPECT_EQ(sums["success"], true);
  ASSERT_EQ(sums["ranks"].size(), 2u);
  EXPECT_EQ(sums["ranks"][1]["parallelism_info"]["tp_rank"], 1);
  EXPECT_EQ(sums["ranks"][0]["per_gpu_checksum"].get<std::string>().size(), 64u);
  EXPECT_EQ(sums["per_engine_checksum"].get<std::string>().size(), 64u);
  for (const auto& [name, hex] : sums["ranks"][0]["checksums"].items()) EXPECT_EQ(hex.get<std::string>().size(), 16u);
}

}  // namespace
}  // namespace wsb
