#include "engine_api/protocols/protocol.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>

#include "core/errors.hpp"
#include "engine_api/protocols/factories.hpp"

namespace wsb {

std::optional<std::string> HttpRequest::query_value(std::string_view key) const {
  for (const auto& [k, v] : query) {
    if (k == key) return v;
  }
  return std::nullopt;
}

HttpRequest Protocol::health() const { return HttpRequest{"GET", "/health", {}, std::nullopt}; }

bool Protocol::plain_text(const HttpRequest&) const { return false; }

void run_commit_calls(const std::vector<CommitCall>& calls, const std::function<void(const HttpRequest&)>& run) {
  std::exception_ptr failure;
  for (CallRole role : {CallRole::Pause, CallRole::Commit}) {
    for (const auto& call : calls) {
      if (call.role != role || failure) continue;
      try {
        run(call.request);
      } catch (...) {
        failure = std::current_exception();
      }
    }
  }
  for (const auto& call : calls) {
    if (call.role != CallRole::Continue) continue;
    try {
      run(call.request);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

const std::vector<std::string>& protocol_names() {
  static const std::vector<std::string> names{"sglang",         "stitch-v0.5.15", "stitch-v0.5.15-host-runtime",
                                              "stitch-v0.5.16", "stitch-staging", "vllm"};
  return names;
}

std::unique_ptr<Protocol> make_protocol(std::string_view name) {
  if (name == "sglang") return make_sglang_protocol();
  if (name == "stitch-v0.5.15") return make_stitch_v0515_protocol(false);
  if (name == "stitch-v0.5.15-host-runtime") return make_stitch_v0515_protocol(true);
  if (name == "stitch-v0.5.16") return make_stitch_v0516_protocol();
  if (name == "stitch-staging") return make_stitch_staging_protocol();
  if (name == "vllm") return make_vllm_protocol();
  throw Error(ErrorKind::Format,
              fmt::format("protocol '{}' is unknown (expected one of: {})", name, fmt::join(protocol_names(), ", ")));
}

std::string protocol_support(const Protocol& protocol, SyncModeKind mode, PauseMode pause) {
  const auto modes = protocol.modes();
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    std::vector<std::string> names;
    for (auto m : modes) names.push_back(name_of(m));
    return fmt::format("protocol '{}' has no {} mode (it drives: {})", protocol.name(), name_of(mode),
                       fmt::join(names, ", "));
  }
  const auto pauses = protocol.pause_modes();
  if (std::find(pauses.begin(), pauses.end(), pause) == pauses.end()) {
    std::vector<std::string> names;
    for (auto p : pauses) names.emplace_back(name_of(p));
    return fmt::format("protocol '{}' has no pause mode {} (it has: {})", protocol.name(), name_of(pause),
                       fmt::join(names, ", "));
  }
  return "";
}

namespace wire {

const nlohmann::json& field(const nlohmann::json& object, const std::string& key, const std::string& endpoint) {
  if (!object.is_object()) {
    throw Error(ErrorKind::Format, fmt::format("{}: the answer is not a JSON object: {}", endpoint,
                                               object.dump().substr(0, 200)));
  }
  auto it = object.find(key);
  if (it == object.end()) {
    throw Error(ErrorKind::Format, fmt::format("{}: field '{}' is missing in {}", endpoint, key,
                                               object.dump().substr(0, 200)));
  }
  return *it;
}

std::string string_field(const nlohmann::json& object, const std::string& key, const std::string& endpoint) {
  const auto& j = field(object, key, endpoint);
  if (!j.is_string()) {
    throw Error(ErrorKind::Format, fmt::format("{}: field '{}' must be a string, got {}", endpoint, key, j.dump()));
  }
  return j.get<std::string>();
}

bool bool_field(const nlohmann::json& object, const std::string& key, const std::string& endpoint) {
  const auto& j = field(object, key, endpoint);
  if (!j.is_boolean()) {
    throw Error(ErrorKind::Format, fmt::format("{}: field '{}' must be a boolean, got {}", endpoint, key, j.dump()));
  }
  return j.get<bool>();
}

void expect_success(const nlohmann::json& reply, const std::string& endpoint) {
  if (bool_field(reply, "success", endpoint)) return;
  std::string message = reply.contains("message") && reply["message"].is_string() ? reply["message"].get<std::string>()
                                                                                   : reply.dump();
  throw Error(ErrorKind::State, fmt::format("{}: the server refused: {}", endpoint, message.substr(0, 200)));
}

}  // namespace wire
}  // namespace wsb
