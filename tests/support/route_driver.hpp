#pragma once
// Drives one protocol's wsbench serve routes in process, as engine_api/serve.cpp would over HTTP: a request the
// client table built goes to the route of its method and path, an Error a route throws becomes the JSON error body
// serve.cpp writes, and the answer comes back parsed the way HttpEngineClient parses it.
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "engine_api/protocols/protocol.hpp"
#include "engine_api/protocols/serve_routes.hpp"

namespace wsb::test {

class RouteDriver {
 public:
  RouteDriver(const std::string& protocol, ServeState& state)
      : protocol_(make_protocol(protocol)), routes_(protocol_routes(protocol, state)) {}

  const Protocol& protocol() const { return *protocol_; }

  /// The route's raw answer; 404 {"detail": "Not Found"} when no route matches.
  HttpReply send(const HttpRequest& request) const {
    for (const Route& route : routes_) {
      if (route.method != request.method || route.path != request.path) continue;
      try {
        return route.handler(request);
      } catch (const Error& e) {
        const bool server = e.kind() == ErrorKind::Fatal || e.kind() == ErrorKind::Io || e.kind() == ErrorKind::Resource;
        return json_reply(server ? 500 : 400, nlohmann::json{{"success", false}, {"message", e.what()}});
      }
    }
    return json_reply(404, nlohmann::json{{"detail", "Not Found"}});
  }

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
    const HttpReply reply = send(request);
    if (reply.status < 200 || reply.status >= 300) {
      throw Error(reply.status >= 500 ? ErrorKind::Fatal : ErrorKind::State,
                  request.endpoint() + ": HTTP " + std::to_string(reply.status) + ": " + reply.body);
    }
    protocol_->check_update_reply(request, protocol_->plain_text(request) ? nlohmann::json(reply.body)
                                                                            : nlohmann::json::parse(reply.body));
  }

  /// The calls of one commit in HttpEngineClient's order: pause calls, commit calls (skipped after a failure), then
  /// the continue calls always. Rethrows the first failure.
  void run_commit(const std::vector<CommitCall>& calls) const {
    std::exception_ptr failure;
    for (CallRole role : {CallRole::Pause, CallRole::Commit}) {
      for (const auto& call : calls) {
        if (call.role != role || failure) continue;
        try {
          run_update(call.request);
        } catch (...) {
          failure = std::current_exception();
        }
      }
    }
    for (const auto& call : calls) {
      if (call.role != CallRole::Continue) continue;
      try {
        run_update(call.request);
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

  GenerateResult generate(const GenerateRequest& request) const {
    return protocol_->parse_generate(json_of(protocol_->generate(request)));
  }
  WeightVersion weight_version() const { return protocol_->parse_weight_version(json_of(protocol_->weight_version())); }
  RankChecksums checksums() const { return protocol_->parse_checksums(json_of(*protocol_->checksums())); }

 private:
  std::unique_ptr<Protocol> protocol_;
  std::vector<Route> routes_;
};

}  // namespace wsb::test
