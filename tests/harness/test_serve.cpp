// `wsbench serve` as a real process on loopback, driven through HttpEngineClient and raw HTTP: the SGLang-fork
// endpoints, state-machine errors as HTTP 400 with the mode's message and kind, a clean SIGTERM stop.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <thread>

#include "harness/http_engine_client.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

class Serve : public ::testing::Test {
 protected:
  void SetUp() override {
    test::publish_tiny(dir_ / "store", 2);
    EngineLaunch launch;
    launch.profile = test::tiny_profile();
    launch.tp = 2;
    launch.mode = "cpu";
    launch.store = dir_ / "store";
    launch.workdir = dir_ / "work";
    launch.server.self = fs::path(WSB_BINARY_DIR) / "wsbench";
    launch.server.profiles_dir = WSB_PROFILES_DIR;
    port_ = pick_free_port();
    fs::create_directories(launch.workdir);
    process_ = std::make_unique<ServerProcess>(
        server_command(launch, Store(dir_ / "store").update_dir(0), 0, port_), dir_ / "server.log");
    client_ = std::make_unique<HttpEngineClient>("127.0.0.1", port_, dir_ / "store");
    for (int i = 0; i < 3000 && !client_->healthy(); ++i) {
      ASSERT_EQ(process_->exit_description(), "") << process_->log_tail();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(client_->healthy()) << process_->log_tail();
  }

  httplib::Result post(const std::string& path, const std::string& body) {
    httplib::Client cli("127.0.0.1", port_);
    return cli.Post(path.c_str(), body, "application/json");
  }

  test::TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ServerProcess> process_;
  std::unique_ptr<HttpEngineClient> client_;
};

TEST_F(Serve, StateMachineErrorsAreHttp400WithTheModesMessage) {
  EXPECT_EQ(client_->weight_version(), 0u);
  test::expect_error([&] { client_->commit(1); }, ErrorKind::State, {"POST /commit_weight_update: HTTP 400: "});
  test::expect_error([&] { client_->prepare(1000); }, ErrorKind::Missing, {"POST /prepare_weight_update: HTTP 400: "});
  test::expect_error([&] { client_->prepare(0); }, ErrorKind::State, {"POST /prepare_weight_update: HTTP 400: "});
  EXPECT_EQ(client_->weight_version(), 0u);
  const PrepareReport prepared = client_->prepare(1);
  EXPECT_FALSE(prepared.already_prepared);
  EXPECT_TRUE(client_->prepare(1).already_prepared);  // idempotent repeat
  const CommitReport committed = client_->commit(1);
  EXPECT_GT(committed.pause_seconds, 0.0);
  EXPECT_EQ(client_->weight_version(), 1u);
  EXPECT_EQ(client_->generate(GenerateRequest{{1, 2, 3}, 4, true}).weight_version, 1u);
  EXPECT_TRUE(client_->reports_error_kinds());
  EXPECT_EQ(client_->storage_checksums().size(), 2u);
  EXPECT_EQ(client_->storage_pointers().size(), 2u);
  ASSERT_TRUE(client_->mode_memory().has_value());
  EXPECT_GT(client_->mode_memory()->rank_image_bytes, 0u);
  EXPECT_FALSE(client_->boot_phases().empty());
}

TEST_F(Serve, BadRequestsNameTheEndpointAndField) {
  auto res = post("/weights_checker", R"({"action": "nope"})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["message"], "POST /weights_checker: action 'nope' is unknown (checksum)");
  res = post("/generate", "not json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error_kind"], "format");
  res = post("/prepare_weight_update", R"({"checkpoint_source_dir": "/elsewhere", "target_version": 1})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(json::parse(res->body)["message"].get<std::string>().find("checkpoint_source_dir '/elsewhere' is not the store"),
            std::string::npos);
  res = post("/commit_weight_update", R"({"abort_all_requests": false})");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["message"], "POST /commit_weight_update: field 'target_version' is missing");
  res = post("/flush_cache", "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  httplib::Client cli("127.0.0.1", port_);
  auto info = cli.Get("/model_info");
  ASSERT_TRUE(info);
  const json j = json::parse(info->body);
  EXPECT_EQ(j["weight_version"], "000000");
  EXPECT_EQ(j["tp_size"], 2);
  EXPECT_EQ(j["wsbench"]["mode"], "cpu");
}

TEST_F(Serve, SigtermStopsCleanly) {
  const json stop = process_->stop(10);
  EXPECT_EQ(stop["stop"], "sigterm");
  EXPECT_EQ(stop["status"], "exited with status 0");
  EXPECT_FALSE(client_->healthy());
  test::expect_error([&] { client_->weight_version(); }, ErrorKind::Io, {"GET /model_info: no answer from 127.0.0.1:"});
}

}  // namespace
}  // namespace wsb
