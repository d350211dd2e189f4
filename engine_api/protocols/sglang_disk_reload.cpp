#include "engine_api/protocols/sglang_disk_reload.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb::sglang {

using json = nlohmann::json;

HttpReply update_weights_from_disk(FamilyServer& server, const HttpRequest& request, const DiskReloadHooks& hooks) {
  const Body body(request);
  const std::filesystem::path model_path = body.required_string("model_path");
  (void)body.optional_string("load_format");
  const std::optional<std::string> weight_version = body.optional_string("weight_version");
  const bool flush_cache = body.optional_bool("flush_cache", true);
  const bool abort_all = body.optional_bool("abort_all_requests", false);
  const json extra{{"num_paused_requests", 0}};
  if (hooks.refuse) {
    if (auto why = hooks.refuse()) return update_reply(false, *why, extra);
  }
  if (flush_cache && server.flush_would_fail()) {
    return json_reply(500,
                      json{{"success", false},
                           {"message",
                            "AssertionError: Cache flush failed after updating weights (flush_cache true while an "
                            "in_place pause holds requests; a real scheduler dies here after loading the weights)"},
                           {"num_paused_requests", 0}});
  }
  const std::optional<uint32_t> prepared = hooks.prepared_target ? hooks.prepared_target(model_path) : std::nullopt;
  Engine& engine = server.engine();
  try {
    if (prepared && *prepared == engine.weight_version()) {
      // The local checkpoint already holds the served weights: the real reload rereads the same bytes.
      server.set_served(*prepared, weight_version);
    } else {
      server.run_update(abort_all, [&](PauseMode mode) {
        uint32_t version;
        CommitReport report;
        if (prepared) {
          version = *prepared;
          report = engine.commit(version, mode);
        } else {
          version = server.state().engine_version_for(weight_version);
          report = engine.commit_checkpoint(model_path, version, mode);
        }
        server.set_served(version, weight_version);
        return report;
      });
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Fatal) {
      return json_reply(
          500, json{{"success", false},
                    {"message", fmt::format("Failed to update weights: {}. The engine stopped serving.", e.what())},
                    {"num_paused_requests", 0}});
    }
    if (e.kind() == ErrorKind::Missing && !prepared) {
      return update_reply(false, fmt::format("Failed to get weights iterator: {}.", e.what()), extra);
    }
    return update_reply(
        false, fmt::format("Failed to update weights: {}.\nRolling back to original weights.", e.what()), extra);
  }
  server.set_model_path(model_path);
  std::string message = "Succeeded to update model weights.";
  if (weight_version) message += fmt::format(" Weight version updated to {}.", *weight_version);
  return update_reply(true, message, extra);
}

}  // namespace wsb::sglang
