// The Stitch fork protocols end to end in process (stitch-v0.5.15, its host-runtime branch, stitch-v0.5.16,
// stitch-staging): the client table's prepare and commit answered by wsbench serve's routes over an embedded
// engine, parsed back by the table. Every mode and pause mode reaches the target with the checksums of a fresh
// native load; the refusals of each fork's server come back as success false with its message and change nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <tuple>

#include "engine_api/protocols/sglang_family.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/protocol_server.hpp"
#include "tests/support/wait_until.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;
using test::ProtocolServer;

GenerateRequest probe(int tokens = 6) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes("stitch probe");
  r.max_new_tokens = tokens;
  return r;
}

/// One update through the table: prepare, then the commit calls.
void update(ProtocolServer& server, uint32_t served, uint32_t target, SyncModeKind mode, PauseMode pause) {
  const UpdateSpec spec = server.spec(served, target, mode, pause);
  const auto prepare = server.protocol().prepare(spec);
  ASSERT_TRUE(prepare);
  server.driver().run_update(*prepare);
  server.driver().run_commit(server.protocol().commit(spec));
}

using Case = std::tuple<std::string, SyncModeKind, PauseMode>;

class StitchUpdate : public ::testing::TestWithParam<Case> {};

TEST_P(StitchUpdate, ReachesTheTargetWithTheChecksumsOfANativeLoad) {
  const auto& [protocol, mode, pause] = GetParam();
  ProtocolServer server(protocol, mode, "0");
  const auto& driver = server.driver();
  EXPECT_EQ(driver.weight_version().text, "0");
  for (uint32_t target : {2u, 3u}) {
    update(server, target == 2 ? 0 : 2, target, mode, pause);
    const LastUpdate last = server.state().last_update();
    ASSERT_TRUE(last.prepare);
    EXPECT_EQ(last.prepare->target, target);
    ASSERT_TRUE(last.commit);
    EXPECT_EQ(last.commit->target, target);
    ASSERT_TRUE(last.commit->pause_seconds);
    const WeightVersion served = driver.weight_version();
    EXPECT_EQ(served.text, std::to_string(target));
    EXPECT_EQ(driver.checksums().ranks, server.native_checksums(target));
    EXPECT_EQ(driver.generate(probe()).version.text, std::to_string(target));
  }
  EXPECT_FALSE(server.engine().paused());
  EXPECT_TRUE(server.engine().healthy());
}

std::vector<Case> cases() {
  const std::vector<std::pair<std::string, SyncModeKind>> tables{{"stitch-v0.5.15", SyncModeKind::Disk},
                                                                 {"stitch-v0.5.15-host-runtime", SyncModeKind::Disk},
                                                                 {"stitch-v0.5.15-host-runtime", SyncModeKind::Cpu},
                                                                 {"stitch-v0.5.16", SyncModeKind::Disk},
                                                                 {"stitch-v0.5.16", SyncModeKind::Cpu},
                                                                 {"stitch-staging", SyncModeKind::Disk},
                                                                 {"stitch-staging", SyncModeKind::Cpu}};
  std::vector<Case> out;
  for (const auto& [protocol, mode] : tables) {
    for (PauseMode pause : sglang::family_pause_modes()) out.emplace_back(protocol, mode, pause);
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = std::get<0>(info.param) + "_" + name_of(std::get<1>(info.param)) + "_" +
                     std::string(name_of(std::get<2>(info.param)));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Tables, StitchUpdate, ::testing::ValuesIn(cases()), case_name);

TEST(StitchProtocols, DefaultsAndBodiesFollowTheClients) {
  for (const char* name : {"stitch-v0.5.15", "stitch-v0.5.15-host-runtime", "stitch-v0.5.16", "stitch-staging"}) {
    EXPECT_EQ(make_protocol(name)->default_pause_mode(), PauseMode::Drain) << name;
  }
  ProtocolServer server("stitch-v0.5.16", SyncModeKind::Disk, "0");
  const UpdateSpec spec = server.spec(0, 2, SyncModeKind::Disk, PauseMode::InPlace);
  EXPECT_EQ(*server.protocol().prepare(spec)->body,
            (json{{"base_checkpoint_dir", spec.base_checkpoint_dir.string()},
                  {"base_version", 0},
                  {"target_version", 2},
                  {"destination", "disk"},
                  {"checkpoint_source_dir", (server.store() / "updates").string()},
                  {"local_checkpoint_dir", spec.local_checkpoint_dir.string()}}));
  const auto calls = server.protocol().commit(spec);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(*calls[1].request.body, (json{{"model_path", spec.local_checkpoint_dir.string()},
                                          {"load_format", "auto"},
                                          {"weight_version", "2"},
                                          {"flush_cache", false}}));
  const auto cpu = server.protocol().commit(server.spec(0, 2, SyncModeKind::Cpu, PauseMode::Drain));
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0].request.path, "/update_weights_from_cpu");
  EXPECT_EQ(*cpu[0].request.body, (json{{"target_version", 2}, {"flush_cache", false}}));
  const auto staging = make_protocol("stitch-staging");
  EXPECT_EQ(*staging->prepare(spec)->body,
            (json{{"checkpoint_source_dir", (server.store() / "updates").string()}, {"target_version", 2}}));
  EXPECT_EQ(
      *staging->commit(spec)[1].request.body,
      (json{
          {"target_version", 2}, {"abort_all_requests", false}, {"torch_empty_cache", false}, {"flush_cache", false}}));
  const auto pull = make_protocol("stitch-v0.5.15-host-runtime");
  EXPECT_EQ((*pull->prepare(server.spec(0, 2, SyncModeKind::Cpu, PauseMode::InPlace))->body)["prepare"], "runtime");
  EXPECT_EQ(*pull->commit(server.spec(0, 2, SyncModeKind::Cpu, PauseMode::InPlace))[1].request.body,
            (json{{"weight_version", "2"}, {"flush_cache", false}}));
  EXPECT_FALSE((*make_protocol("stitch-v0.5.15")->prepare(spec)->body).contains("prepare"));
}

TEST(StitchProtocols, EveryBodyTheTablesBuildIsARecordedRequest) {
  ProtocolServer server("stitch-v0.5.16", SyncModeKind::Disk, "0");
  for (const char* name :
       {"sglang", "stitch-v0.5.15", "stitch-v0.5.15-host-runtime", "stitch-v0.5.16", "stitch-staging"}) {
    SCOPED_TRACE(name);
    const auto protocol = make_protocol(name);
    test::expect_recorded(name, protocol->generate(probe()));
    test::expect_recorded(name, *protocol->checksums());
    for (SyncModeKind mode : protocol->modes()) {
      for (PauseMode pause : protocol->pause_modes()) {
        UpdateSpec spec = server.spec(1, 2, mode, pause);
        if (!protocol->server_prepares(mode)) spec.checkpoint_dir = server.full_checkpoint(2);
        if (const auto prepare = protocol->prepare(spec)) test::expect_recorded(name, *prepare);
        for (const auto& call : protocol->commit(spec)) test::expect_recorded(name, call.request);
      }
    }
  }
}

/// The prepare of `protocol` with one field replaced.
HttpRequest with_field(const Protocol& protocol, const UpdateSpec& spec, const std::string& key, const json& value) {
  HttpRequest request = *protocol.prepare(spec);
  (*request.body)[key] = value;
  return request;
}

TEST(StitchProtocols, PreparesRefuseAnotherSourceAndAMissingVersion) {
  const std::vector<std::tuple<std::string, SyncModeKind, std::string>> cases{
      {"stitch-v0.5.15", SyncModeKind::Disk, "source_dir"},
      {"stitch-v0.5.15-host-runtime", SyncModeKind::Cpu, "source_dir"},
      {"stitch-v0.5.16", SyncModeKind::Cpu, "checkpoint_source_dir"},
      {"stitch-staging", SyncModeKind::Disk, "checkpoint_source_dir"}};
  for (const auto& [protocol, mode, field] : cases) {
    SCOPED_TRACE(protocol);
    ProtocolServer server(protocol, mode, "0");
    const auto& driver = server.driver();
    const auto before = server.engine().storage_checksums();
    const UpdateSpec spec = server.spec(0, 2, mode, PauseMode::InPlace);
    const json elsewhere = driver.json_of(with_field(server.protocol(), spec, field, "/elsewhere/updates"), 400);
    EXPECT_EQ(elsewhere["success"], false);
    EXPECT_NE(elsewhere["message"].get<std::string>().find(field + " '/elsewhere/updates'"), std::string::npos)
        << elsewhere;

    const UpdateSpec missing = server.spec(0, 9, mode, PauseMode::InPlace);
    const json absent = driver.json_of(*server.protocol().prepare(missing), 400);
    EXPECT_EQ(absent["success"], false);
    EXPECT_NE(absent["message"].get<std::string>().find("FileNotFoundError: "), std::string::npos) << absent;
    test::expect_error([&] { driver.run_update(*server.protocol().prepare(missing)); }, ErrorKind::State, {"HTTP 400"});

    // A commit of a target never prepared is refused before anything changes.
    const auto commit = server.protocol().commit(spec);
    EXPECT_THROW(driver.run_commit(commit), Error);
    EXPECT_FALSE(server.engine().paused());  // the continue ran after the failed commit
    EXPECT_EQ(driver.weight_version().text, "0");
    EXPECT_EQ(server.engine().storage_checksums(), before);
    EXPECT_TRUE(server.engine().healthy());
  }
}

TEST(StitchProtocols, MissingAndMistypedFieldsAreValidationErrors) {
  ProtocolServer server("stitch-staging", SyncModeKind::Disk, "0");
  const auto& driver = server.driver();
  const json missing =
      driver.json_of(HttpRequest{"POST", "/commit_weight_update", {}, json{{"flush_cache", false}}}, 400);
  EXPECT_EQ(missing["object"], "error");
  EXPECT_NE(missing["message"].get<std::string>().find("('body', 'target_version'), 'msg': 'Field required'"),
            std::string::npos);
  const json mistyped = driver.json_of(
      HttpRequest{"POST",
                  "/prepare_weight_update",
                  {},
                  json{{"checkpoint_source_dir", (server.store() / "updates").string()}, {"target_version", "two"}}},
      400);
  EXPECT_NE(mistyped["message"].get<std::string>().find("int_parsing"), std::string::npos);
  // pydantic's lax mode takes a decimal string for an int, and an unknown field is ignored.
  const json lax = driver.json_of(HttpRequest{
      "POST",
      "/prepare_weight_update",
      {},
      json{{"checkpoint_source_dir", (server.store() / "updates").string()}, {"target_version", "1"}, {"extra", 1}}});
  EXPECT_EQ(lax["message"], "Prepared weight version 1.");
  EXPECT_EQ(driver.json_of(HttpRequest{"POST",
                                       "/prepare_weight_update",
                                       {},
                                       json{{"checkpoint_source_dir", (server.store() / "updates").string()},
                                            {"target_version", 1}}})["message"],
            "Weight version 1 is prepared.");
  const json behind = driver.json_of(
      HttpRequest{"POST",
                  "/prepare_weight_update",
                  {},
                  json{{"checkpoint_source_dir", (server.store() / "updates").string()}, {"target_version", 0}}},
      400);
  EXPECT_EQ(behind["message"], "Target version 0 must not precede prepared version 1.");
}

TEST(StitchProtocols, StagingReportsItsDestinationAndRefusesOtherUpdates) {
  ProtocolServer server("stitch-staging", SyncModeKind::Disk, "0");
  const auto& driver = server.driver();
  const json info = driver.json_of(HttpRequest{"GET", "/server_info", {}, std::nullopt});
  EXPECT_EQ(info["weight_update_staging"], "disk");
  EXPECT_EQ(info["weight_update_local_checkpoint_dir"], (server.dir() / "server" / "engine-checkpoint").string());
  const json refused = driver.json_of(
      HttpRequest{"POST", "/update_weights_from_disk", {}, json{{"model_path", server.full_checkpoint(1).string()}}},
      400);
  EXPECT_NE(refused["message"].get<std::string>().find("unavailable while staged weight updates are enabled"),
            std::string::npos);
  EXPECT_EQ(driver.weight_version().text, "0");
}

TEST(StitchProtocols, StageInitializationAndDestinationChecks) {
  ProtocolServer server("stitch-v0.5.16", SyncModeKind::Cpu, "0");
  const auto& driver = server.driver();
  // The client's initialization before the replica serves: a stage of the base without a source.
  const json init = driver.json_of(HttpRequest{"POST",
                                               "/stage_weight_update",
                                               {},
                                               json{{"base_checkpoint_dir", server.state().boot_checkpoint().string()},
                                                    {"base_version", 0},
                                                    {"target_version", 0},
                                                    {"destination", "cpu"}}});
  EXPECT_EQ(init["success"], true);
  EXPECT_EQ(init["rank_stats"].size(), 1u);
  const UpdateSpec disk = server.spec(0, 2, SyncModeKind::Disk, PauseMode::InPlace);
  const json refused = driver.json_of(*server.protocol().prepare(disk), 400);
  EXPECT_EQ(refused["message"], "Disk staging is unavailable while the CPU weight cache is enabled.");
  const json no_source = driver.json_of(
      HttpRequest{
          "POST", "/stage_weight_update", {}, json{{"base_version", 0}, {"target_version", 2}, {"destination", "cpu"}}},
      400);
  EXPECT_EQ(no_source["message"], "checkpoint_source_dir is required after the base version.");
  const json reload = driver.json_of(
      HttpRequest{"POST", "/update_weights_from_disk", {}, json{{"model_path", server.full_checkpoint(1).string()}}},
      400);
  EXPECT_NE(reload["message"].get<std::string>().find("unavailable while the CPU weight cache is enabled"),
            std::string::npos);
}

TEST(StitchProtocols, PullIsANoOpAtOrBelowTheAppliedVersionAndTheHostImageNeedsItsVersion) {
  ProtocolServer server("stitch-v0.5.15-host-runtime", SyncModeKind::Cpu, "0");
  const auto& driver = server.driver();
  const UpdateSpec spec = server.spec(0, 2, SyncModeKind::Cpu, PauseMode::InPlace);
  driver.run_update(*server.protocol().prepare(spec));
  const json wrong =
      driver.json_of(HttpRequest{"POST", "/update_weights_from_prepared", {}, json{{"weight_version", "000002"}}}, 400);
  EXPECT_NE(wrong["message"].get<std::string>().find("prepared runtime version mismatch: requested=000002, prepared=2"),
            std::string::npos)
      << wrong;
  driver.run_commit(server.protocol().commit(spec));
  EXPECT_EQ(driver.weight_version().text, "2");
  // The local checkpoint already holds v2: pulling v1 or v2 again succeeds without work.
  for (uint32_t again : {1u, 2u}) {
    const json noop =
        driver.json_of(*server.protocol().prepare(server.spec(2, again, SyncModeKind::Cpu, PauseMode::InPlace)));
    EXPECT_EQ(noop["success"], true);
  }
  EXPECT_EQ(driver.checksums().ranks, server.native_checksums(2));
}

TEST(StitchProtocols, InPlaceKeepsARequestAcrossTheStagedCommit) {
  ProtocolServer server("stitch-staging", SyncModeKind::Cpu, "0");
  const auto& driver = server.driver();
  const UpdateSpec spec = server.spec(0, 3, SyncModeKind::Cpu, PauseMode::InPlace);
  driver.run_update(*server.protocol().prepare(spec));
  auto request = std::async(std::launch::async, [&] { return driver.generate(probe(3000)); });
  ASSERT_TRUE(test::wait_until([&] { return server.engine().debug_requests_held() > 0; }, "the request in flight"));
  // Some tokens before the pause (a decode step takes well under a millisecond; the request needs thousands).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  driver.run_commit(server.protocol().commit(spec));
  const GenerateResult result = request.get();
  ASSERT_FALSE(result.step_versions.empty());
  EXPECT_EQ(result.step_versions.front().text, "0");
  EXPECT_EQ(result.step_versions.back().text, "3");
  EXPECT_EQ(result.response.finish_reason, "length");
}

}  // namespace
}  // namespace wsb
