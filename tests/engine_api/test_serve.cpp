// `wsbench serve --protocol P` as a real process on loopback, driven through HttpEngineClient and raw HTTP: an
// update through the protocol, the server faults a real server shows (404, non-JSON, a missing field, a refusal, a
// death inside the commit) each failing with the endpoint, the status and the body's first bytes, FastAPI-shaped
// answers for what no route takes, a clean SIGTERM stop, and the refusals of the command line.
#include <gtest/gtest.h>

#include <httplib.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine_api/http_engine_client.hpp"
#include "publication/store.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

class Serve : public ::testing::Test {
 protected:
  void SetUp() override { test::publish_tiny(dir_ / "store", 2); }

  EngineLaunch launch(const std::string& protocol, std::vector<std::string> faults = {}) {
    EngineLaunch l;
    l.engine = "http";
    l.protocol = protocol;
    l.options.profile = test::tiny_profile();
    l.options.tp = 2;
    l.options.sync = test::sync_of("disk");
    l.options.store = dir_ / "store";
    l.options.workdir = dir_ / ("work-" + protocol + std::to_string(boots_++));
    l.server.self = fs::path(WSBENCH_BINARY_DIR) / "wsbench";
    l.server.profiles_dir = WSBENCH_PROFILES_DIR;
    l.server.ready_timeout_s = 30;
    l.server.command = default_serve_command(l);
    for (const auto& f : faults) l.server.command.insert(l.server.command.end(), {"--fault", f});
    return l;
  }

  std::unique_ptr<HttpEngineClient> boot(const std::string& protocol, std::vector<std::string> faults = {}) {
    return std::make_unique<HttpEngineClient>(launch(protocol, std::move(faults)), Store(dir_ / "store").update_dir(0),
                                              0);
  }

  /// `wsbench serve` with this fixture's store and checkpoint plus `extra` arguments, run to its exit: the exit
  /// status and stderr.
  std::pair<int, std::string> serve_cli(const std::vector<std::string>& extra) {
    EngineLaunch l = launch("sglang");
    std::vector<std::string> argv = server_command(l, Store(dir_ / "store").update_dir(0), 0, 0);
    // Drop the template's --version, --host and --port so each test states its own.
    for (const char* flag : {"--version", "--host", "--port"}) {
      for (size_t i = 0; i + 1 < argv.size(); ++i) {
        if (argv[i] == flag) {
          argv.erase(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.begin() + static_cast<std::ptrdiff_t>(i) + 2);
        }
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
  int boots_ = 0;
};

TEST_F(Serve, AnSglangUpdateEndsAtTheTargetWithAMeasuredPause) {
  auto client = boot("sglang");
  // Upstream SGLang boots as "default" without --weight-version: the boot version, with a warning.
  EXPECT_EQ(client->weight_version(), 0u);
  ASSERT_EQ(client->warnings().size(), 1u);
  EXPECT_NE(client->warnings()[0].find("reports weight_version \"default\""), std::string::npos);
  const PrepareReport prepared = client->prepare(1);
  ASSERT_FALSE(prepared.phases.empty());
  EXPECT_TRUE(prepared.phases.front().name.starts_with("harness.")) << prepared.phases.front().name;
  const CommitReport committed = client->commit(1);
  ASSERT_TRUE(committed.pause_seconds.has_value());  // wsbench serve reports it (GET /wsbench/last_update)
  EXPECT_GT(*committed.pause_seconds, 0.0);
  EXPECT_LE(*committed.pause_seconds, committed.seconds);
  EXPECT_EQ(client->weight_version(), 1u);
  EXPECT_EQ(client->generate(GenerateRequest{{1, 2, 3}, 4, true}).weight_version, 1u);
  EXPECT_EQ(client->storage_checksums().size(), 2u);
  EXPECT_EQ(client->storage_pointers().size(), 2u);
  EXPECT_FALSE(client->boot_phases().empty());
}

TEST_F(Serve, ServerFaultsNameTheEndpointTheStatusAndTheBody) {
  {
    auto client = boot("sglang", {"http-404:/update_weights_from_disk"});
    client->prepare(1);
    test::expect_error([&] { client->commit(1); }, ErrorKind::State,
                       {"POST /update_weights_from_disk: HTTP 404: the server refused: '{\"detail\":\"Not Found\"}'"});
    EXPECT_EQ(client->weight_version(), 0u);  // nothing changed
  }
  {
    auto client = boot("sglang", {"non-json:/model_info"});
    test::expect_error([&] { client->weight_version(); }, ErrorKind::Format,
                       {"GET /model_info: HTTP 200: the answer is not JSON (Content-Type 'text/html'): "
                        "'<html>fault non-json</html>'"});
  }
  {
    auto client = boot("sglang", {"missing-field:/generate"});
    test::expect_error([&] { client->generate(GenerateRequest{{1, 2, 3}, 4, true}); }, ErrorKind::Format,
                       {"POST /generate: ", "is missing"});
  }
  {
    auto client = boot("sglang", {"refuse:/update_weights_from_disk"});
    client->prepare(1);
    test::expect_error([&] { client->commit(1); }, ErrorKind::State,
                       {"POST /update_weights_from_disk: HTTP 400: the server refused: '{\"message\":"
                        "\"POST /update_weights_from_disk: fault refuse\",\"success\":false}'"});
  }
  {
    auto client = boot("sglang", {"die-in-commit"});
    client->prepare(1);
    test::expect_error([&] { client->commit(1); }, ErrorKind::Io,
                       {"POST /update_weights_from_disk: no answer from 127.0.0.1:",
                        "the server process exited with status 17"});
  }
}

TEST_F(Serve, WhatNoRouteTakesIsAnsweredAsFastApiDoes) {
  auto client = boot("sglang");
  httplib::Client cli("127.0.0.1", client->port());
  auto unknown = cli.Get("/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->body, R"({"detail":"Not Found"})");
  auto bad = cli.Post("/generate", "not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422);
  EXPECT_EQ(json::parse(bad->body)["detail"][0]["type"], "json_invalid");
  auto huge = cli.Post("/generate", "1e999", "application/json");  // beyond double: still the client's error
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 422);
  EXPECT_EQ(client->weight_version(), 0u);
}

TEST_F(Serve, RefusesANonLoopbackHostAVersionTheCheckpointDoesNotRecordAndABusyPort) {
  auto [rc, err] = serve_cli({"--host", "0.0.0.0", "--version", "0"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "wsbench: error (format): wsbench serve: --host '0.0.0.0' is not a loopback address (127.0.0.0/8, "
                 "::1, localhost): the weight-update endpoints have no authentication\n");
  std::tie(rc, err) = serve_cli({"--host", "127.0.0.1", "--version", "3"});
  EXPECT_EQ(rc, 2);
  const fs::path index = Store(dir_ / "store").update_dir(0) / "model.safetensors.index.json";
  EXPECT_EQ(err, "wsbench: error (mismatch): wsbench serve: --version 3 but " + index.string() +
                     " records version 000000\n");
  // A port another socket holds: the OS error and the port.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  std::tie(rc, err) = serve_cli({"--host", "127.0.0.1", "--version", "0", "--port", std::to_string(port)});
  ::close(fd);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, fmt::format("wsbench: error (io): wsbench serve: cannot listen on 127.0.0.1:{} (Address already in "
                             "use)\n",
                             port));
}

TEST_F(Serve, SigtermStopsCleanly) {
  auto client = boot("sglang");
  const json stop = client->shutdown();
  EXPECT_EQ(stop["stop"], "sigterm");
  EXPECT_EQ(stop["status"], "exited with status 0");
  EXPECT_FALSE(client->healthy());
  test::expect_error([&] { client->weight_version(); }, ErrorKind::State, {"GET /model_info: the server was stopped"});
}

}  // namespace
}  // namespace wsb
