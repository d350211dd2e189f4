#pragma once
// Drives one protocol's wsbench serve routes in process, as engine_api/serve.cpp would over HTTP: a request the
// client table built goes to the route of its method and path, an Error a route throws becomes the JSON error body
// serve.cpp writes, and the answer comes back parsed the way HttpEngineClient parses it. Every request the table
// builds and every 200 JSON answer the routes give is checked against the recorded protocol
// (tests/fixtures/protocols/<protocol>/<endpoint>.json) when it has a field table for it.
#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "engine_api/protocols/protocol.hpp"
#include "engine_api/protocols/serve_routes.hpp"
#include "tests/support/protocol_fixtures.hpp"

namespace wsb::test {

/// The recorded "request" or "response" table of the endpoint `request` names, for `protocol`, when the fixture has
/// one with fields.
inline std::optional<nlohmann::json> recorded_table(const std::string& protocol, const HttpRequest& request,
                                                    const std::string& side) {
  const std::string file = request.path.substr(1) + ".json";
  if (!std::filesystem::exists(protocol_fixtures_root() / protocol / file)) return std::nullopt;
  const nlohmann::json fixture = load_protocol_fixture(protocol, file);
  auto it = fixture.find(side);
  if (it == fixture.end() || !it->is_object() || !it->contains("fields")) return std::nullopt;
  return *it;
}

/// Fails the test when the body of `request` (built by `protocol`'s table) breaks the recorded request table.
inline void expect_recorded(const std::string& protocol, const HttpRequest& request) {
  if (!request.body) return;
  if (const auto table = recorded_table(protocol, request, "request")) {
    EXPECT_EQ(field_violations(*table, *request.body), std::vector<std::string>{})
        << protocol << " " << request.endpoint() << " sent " << request.body->dump();
  }
}

class RouteDriver {
 public:
  RouteDriver(const std::string& protocol, ServeState& state)
      : protocol_(make_protocol(protocol)), routes_(protocol_routes(protocol, state)) {}

  const Protocol& protocol() const { return *protocol_; }

  /// The route's raw answer; 404 {"detail": "Not Found"} when no route matches. A 200 JSON answer must conform to
  /// the recorded response table.
  HttpReply send(const HttpRequest& request) const {
    for (const Route& route : routes_) {
      if (route.method != request.method || route.path != request.path) continue;
      HttpReply reply;
      try {
        reply = route.handler(request);
      } catch (const Error& e) {
        const bool server =
            e.kind() == ErrorKind::Fatal || e.kind() == ErrorKind::Io || e.kind() == ErrorKind::Resource;
        return json_reply(server ? 500 : 400, nlohmann::json{{"success", false}, {"message", e.what()}});
      }
      if (reply.status == 200 && reply.content_type == "application/json") {
        if (const auto table = recorded_table(name(), request, "response")) {
          EXPECT_EQ(field_violations(*table, nlohmann::json::parse(reply.body)), std::vector<std::string>{})
              << request.endpoint() << " answered " << reply.body.substr(0, 400);
        }
      }
      return reply;
    }
    return json_reply(404, nlohmann::json{{"detail", "Not Found"}});
  }

  void expect_recorded(const HttpRequest& request) const { test::expect_recorded(name(), request); }
  std::string name() const { return std::string(protocol_->name()); }

  /// The answer as JSON (a text/plain answer as a JSON string, as the client reads it); fails the test unless the
  /// status is `status`.
  nlohmann::json json_of(const HttpRequest& request, int status = 200) const {
    const HttpReply reply = send(request);
    EXPECT_EQ(reply.status, status) << request.endpoint() << ": " << reply.body;
    if (protocol_->plain_text(request)) return nlohmann::json(reply.body);
    return nlohmann::json::parse(reply.body);
  }

  /// One exchange as HttpEngineClient does it: a 2xx answer judged by the table, else an Error naming the status.
  void run_update(const HttpRequest& request) const {
    expect_recorded(request);
    const HttpReply reply = send(request);
    if (reply.status < 200 || reply.status >= 300) {
      throw Error(reply.status >= 500 ? ErrorKind::Fatal : ErrorKind::State,
                  request.endpoint() + ": HTTP " + std::to_string(reply.status) + ": " + reply.body);
    }
    protocol_->check_update_reply(
        request, protocol_->plain_text(request) ? nlohmann::json(reply.body) : nlohmann::json::parse(reply.body));
  }

  /// The calls of one commit in HttpEngineClient's order: pause calls, commit calls (skipped after a failure), then
  /// the continue calls always. Rethrows the first failure.
  void run_commit(const std::vector<CommitCall>& calls) const {
    run_commit_calls(calls, [this](const HttpRequest& request) { run_update(request); });
  }

  GenerateResult generate(const GenerateRequest& request) const {
    const HttpRequest http = protocol_->generate(request);
    expect_recorded(http);
    return protocol_->parse_generate(json_of(http));
  }
  WeightVersion weight_version() const { return protocol_->parse_weight_version(json_of(protocol_->weight_version())); }
  RankChecksums checksums() const {
    const HttpRequest http = *protocol_->checksums();
    expect_recorded(http);
    return protocol_->parse_checksums(json_of(http));
  }

 private:
  std::unique_ptr<Protocol> protocol_;
  std::vector<Route> routes_;
};

}  // namespace wsb::test
