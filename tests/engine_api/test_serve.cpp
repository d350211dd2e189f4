// `wsbench serve` as a real process on loopback, driven through HttpEngineClient and raw HTTP: the SGLang-fork
// endpoints, state-machine errors as HTTP 400 with the mode's message and kind, a clean SIGTERM stop.
#include <gtest/gtest.h>

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine_api/http_engine_client.hpp"
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
    launch.options.profile = test::tiny_profile();
    launch.options.tp = 2;
    launch.options.store = dir_ / "store";
    launch.options.workdir = dir_ / "work";
    launch.server.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
    launch.server.profiles_dir = WSBENCH_PROFILES_DIR;
    port_ = pick_free_port();
    fs::create_directories(launch.options.workdir);
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

  /// One request written as is (no client library adding headers), the whole answer read back.
  std::string raw_request(const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return "connect failed";
    }
    (void)!::write(fd, request.data(), request.size());
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return answer;
  }

  /// `wsbench serve` with this fixture's store and checkpoint plus `extra` arguments, run to its exit: the exit
  /// status and stderr.
  std::pair<int, std::string> serve_cli(const std::vector<std::string>& extra) {
    EngineLaunch launch;
    launch.options.profile = test::tiny_profile();
    launch.options.tp = 2;
    launch.options.store = dir_ / "store";
    launch.options.workdir = dir_ / "work-cli";
    launch.server.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
    launch.server.profiles_dir = WSBENCH_PROFILES_DIR;
    std::vector<std::string> argv = server_command(launch, Store(dir_ / "store").update_dir(0), 0, 0);
    // Drop the template's --version and --host so each test states its own.
    for (const char* flag : {"--version", "--host"}) {
      for (size_t i = 0; i + 1 < argv.size(); ++i) {
        if (argv[i] == flag) argv.erase(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      }
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string line = "timeout 20 ";  // a server that wrongly starts must not hang the test
    for (const auto& a : argv) line += "'" + a + "' ";
    const fs::path err = dir_ / "cli.stderr";
    const int rc = std::system((line + "</dev/null >/dev/null 2>'" + err.string() + "'").c_str());
    std::ifstream in(err);
    std::stringstream text;
    text << in.rdbuf();
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text.str()};
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
  res = post("/generate", "1e999");  // beyond double: the JSON library's out_of_range, still the client's error
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

TEST_F(Serve, AnswersTheLibraryGivesItselfAreJsonNamingTheRequest) {
  // No Content-Length on a POST, and a path with no endpoint: cpp-httplib answers these without a handler.
  const std::string bodyless =
      raw_request("POST /prepare_weight_update HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const auto json_of = [](const std::string& answer) {
    const auto at = answer.find("\r\n\r\n");
    return at == std::string::npos ? json() : json::parse(answer.substr(at + 4), nullptr, false);
  };
  EXPECT_TRUE(bodyless.starts_with("HTTP/1.1 400")) << bodyless;
  const json bodyless_json = json_of(bodyless);
  ASSERT_TRUE(bodyless_json.is_object()) << bodyless;
  EXPECT_EQ(bodyless_json["message"],
            "POST /prepare_weight_update: HTTP 400: refused before it reached the endpoint (a POST needs a "
            "Content-Length header and a JSON body)")
      << bodyless;
  const std::string unknown = raw_request("GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(unknown.starts_with("HTTP/1.1 404")) << unknown;
  EXPECT_EQ(json_of(unknown)["message"], "GET /nope: HTTP 404: no such endpoint") << unknown;
  EXPECT_EQ(client_->weight_version(), 0u);
}

TEST_F(Serve, RefusesANonLoopbackHostAndAVersionTheCheckpointDoesNotRecord) {
  auto [rc, err] = serve_cli({"--host", "0.0.0.0", "--version", "0"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "wsbench: error (format): wsbench serve: --host '0.0.0.0' is not a loopback address (127.0.0.0/8, "
                 "::1, localhost): the weight-update endpoints have no authentication\n");
  std::tie(rc, err) = serve_cli({"--host", "127.0.0.1", "--version", "3"});
  EXPECT_EQ(rc, 2);
  const fs::path index = Store(dir_ / "store").update_dir(0) / "model.safetensors.index.json";
  EXPECT_EQ(err, "wsbench: error (mismatch): wsbench serve: --version 3 but " + index.string() +
                     " records version 000000\n");
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
