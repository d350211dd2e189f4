#pragma once
// One HTTP exchange with an engine server (cpp-httplib), and the error texts every failure shares: they name the
// endpoint, the status and the first 200 bytes of the body, so a cell that fails against a real server says
// exactly what the server answered.
#include <optional>
#include <string>

#include "core/errors.hpp"
#include "engine_api/protocols/protocol.hpp"

namespace wsb {

struct HttpTimeouts {
  double connect_s = 2;
  double request_s = 300;  ///< read timeout of one request (HttpRequest::timeout_s overrides it)
};

/// Sends `request` (JSON body with Content-Type application/json; query parameters URL-encoded; the extras header
/// when asked). Returns nullopt when no answer came (`why` then says what httplib reported).
std::optional<HttpReply> send_http(const std::string& host, int port, const HttpRequest& request,
                                   const HttpTimeouts& timeouts, std::string* why = nullptr);

/// The first 200 bytes of `body`, newlines as spaces, "..." when cut.
std::string body_excerpt(const std::string& body);

/// Error(Format) "ENDPOINT: HTTP STATUS: CONTEXT: 'first 200 bytes'".
[[noreturn]] void throw_reply_error(ErrorKind kind, const HttpRequest& request, const HttpReply& reply,
                                    const std::string& context);

}  // namespace wsb
