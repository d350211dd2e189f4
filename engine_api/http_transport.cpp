#include "engine_api/http_transport.hpp"

#include <httplib.h>

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"

namespace wsb {
namespace {

void set_timeout(httplib::Client& cli, double seconds, bool connect) {
  const auto whole = static_cast<time_t>(seconds);
  const auto usec = static_cast<time_t>(std::llround((seconds - static_cast<double>(whole)) * 1e6));
  if (connect) {
    cli.set_connection_timeout(whole, usec);
  } else {
    cli.set_read_timeout(whole, usec);
    cli.set_write_timeout(whole, usec);
  }
}

}  // namespace

std::optional<HttpReply> send_http(const std::string& host, int port, const HttpRequest& request,
                                   const HttpTimeouts& timeouts, std::string* why) {
  httplib::Client cli(host, port);
  set_timeout(cli, timeouts.connect_s, true);
  set_timeout(cli, request.timeout_s > 0 ? request.timeout_s : timeouts.request_s, false);
  httplib::Params params;
  for (const auto& [k, v] : request.query) params.emplace(k, v);
  httplib::Headers headers;
  if (request.extras) headers.emplace("X-Wsbench-Extras", "1");
  std::string path = request.path;
  if (!params.empty()) path = httplib::append_query_params(request.path, params);
  // A POST without a JSON body still sends an empty one: FastAPI routes with query parameters only accept it.
  httplib::Result res = request.method == "GET" ? cli.Get(path, headers)
                                                : cli.Post(path, headers, request.body ? request.body->dump() : "",
                                                           "application/json");
  if (!res) {
    if (why) *why = httplib::to_string(res.error());
    return std::nullopt;
  }
  HttpReply reply;
  reply.status = res->status;
  reply.content_type = res->get_header_value("Content-Type");
  reply.body = res->body;
  return reply;
}

std::string body_excerpt(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > 200 ? s + "..." : s;
}

void throw_reply_error(ErrorKind kind, const HttpRequest& request, const HttpReply& reply,
                       const std::string& context) {
  throw Error(kind, fmt::format("{}: HTTP {}: {}: '{}'", request.endpoint(), reply.status, context,
                                body_excerpt(reply.body)));
}

}  // namespace wsb
