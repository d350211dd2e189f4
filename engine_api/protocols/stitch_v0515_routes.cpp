// wsbench serve --protocol stitch-v0.5.15[-host-runtime]: the /pull_weights fork over the embedded engine.
// Sources: modal-projects/sglang@557e19e1b ("F", stitch-sglang-v0.5.15-post1) and @1d2290684 ("H", its
// -host-runtime branch), paths under python/sglang/srt/. A pull is Engine::prepare of the target (the engine runs
// the mode `wsbench serve --mode` gave it and reads its own store, which source_dir must name); the reload of the
// pulled local checkpoint, and H's /update_weights_from_prepared, are Engine::commit of that target.
#include <fmt/format.h>

#include <limits>
#include <mutex>

#include "core/errors.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_disk_reload.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "engine_api/protocols/sglang_family_routes.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

class PullServer {
 public:
  PullServer(ServeState& state, bool host_runtime) : server_(state), host_runtime_(host_runtime) {}

  std::vector<Route> routes() {
    std::vector<Route> routes = server_.common_routes();
    routes.push_back({"POST", "/pull_weights", sglang::validated([this](const HttpRequest& r) { return pull(r); })});
    routes.push_back({"POST", "/update_weights_from_disk", sglang::validated([this](const HttpRequest& r) {
                        sglang::DiskReloadHooks hooks;
                        hooks.prepared_target = [this](const fs::path& model_path) { return pulled_into(model_path); };
                        return sglang::update_weights_from_disk(server_, r, hooks);
                      })});
    if (host_runtime_) {
      routes.push_back({"POST", "/update_weights_from_prepared",
                        sglang::validated([this](const HttpRequest& r) { return from_prepared(r); })});
    }
    return routes;
  }

 private:
  /// The pulled version when `model_path` is the local checkpoint the last pull filled.
  std::optional<uint32_t> pulled_into(const fs::path& model_path) {
    std::lock_guard lock(mu_);
    if (!local_dir_ || !applied_ || !sglang::same_path(model_path, *local_dir_)) return std::nullopt;
    return applied_;
  }

  /// {local_checkpoint_dir, source_dir, target_version, prepare (H: "checkpoint" | "runtime")} -> {success, message}
  /// (F:entrypoints/http_server.py:1158-1170; F:managers/io_struct.py:1543-1556; H:managers/io_struct.py:1560-1576).
  HttpReply pull(const HttpRequest& request) {
    const sglang::Body body(request);
    const fs::path local_dir = body.required_string("local_checkpoint_dir");
    const fs::path source_dir = body.required_string("source_dir");
    const int64_t target = body.required_int("target_version");
    // F ignores the unknown key; H reads it.
    const bool runtime = host_runtime_ && body.literal("prepare", {"checkpoint", "runtime"}, "checkpoint") == "runtime";
    if (!sglang::same_path(source_dir, server_.updates_dir())) {
      return sglang::update_reply(false, fmt::format("wsbench serve: source_dir '{}' is not the folder of this "
                                                     "server's publications ('{}')",
                                                     source_dir.string(), server_.updates_dir().string()));
    }
    // The engine prepares in the mode it runs: a checkpoint pull needs disk, a runtime pull cpu.
    const std::string mode = server_.engine_mode();
    if (runtime && mode != "cpu") {
      return sglang::update_reply(false,
                                  "Traceback (most recent call last):\n  (the embedded engine of wsbench "
                                  "serve)\nRuntimeError: Host runtime weight updates are disabled. Launch with "
                                  "--enable-host-runtime-weight-update. (wsbench serve --mode cpu)\n");
    }
    if (!runtime && mode != "disk") {
      return sglang::update_reply(false, fmt::format("wsbench serve: a checkpoint pull needs `wsbench serve --mode "
                                                     "disk` (this server runs {})",
                                                     mode));
    }
    if (target < 0 || target > std::numeric_limits<uint32_t>::max()) {
      return sglang::update_reply(
          false, fmt::format("Traceback (most recent call last):\n  (the embedded engine of wsbench serve)\n"
                             "FileNotFoundError: published weight version missing: {}\n",
                             (source_dir / fmt::format("weight_v{:06d}", target)).string()));
    }
    const auto version = static_cast<uint32_t>(target);
    Engine& engine = server_.engine();
    {
      std::lock_guard lock(mu_);
      // A local checkpoint at or past the target is a no-op success (F:weight_sync/local_checkpoint.py:100-104);
      // the boot checkpoint counts as applied for the version served.
      const std::optional<uint32_t> applied =
          local_dir_ && sglang::same_path(*local_dir_, local_dir) ? applied_ : std::nullopt;
      if ((applied && version <= *applied) || version == engine.weight_version()) {
        local_dir_ = local_dir;
        applied_ = applied ? std::max(*applied, version) : version;
        return sglang::update_reply(true, success_message(runtime, version, nullptr));
      }
    }
    PrepareReport report;
    try {
      report = engine.prepare(version);
    } catch (const Error& e) {
      return sglang::update_reply(false, sglang::traceback_message(e));
    }
    server_.state().record_prepare(report);
    {
      std::lock_guard lock(mu_);
      local_dir_ = local_dir;
      applied_ = version;
      runtime_prepared_ = runtime ? std::optional<uint32_t>(version) : std::nullopt;
    }
    return sglang::update_reply(true, success_message(runtime, version, &report));
  }

  /// F: "Success." (F:managers/scheduler_components/weight_updater.py:153); H: "Verified host-local checkpoint."
  /// or "Verified checkpoint and prepared host runtime: {stats}" (H:same file:178-191).
  std::string success_message(bool runtime, uint32_t version, const PrepareReport* report) const {
    if (!host_runtime_) return "Success.";
    if (!runtime) return "Verified host-local checkpoint.";
    if (!report)
      return fmt::format(
          "Verified checkpoint and prepared host runtime: {{'target_version': {}, "
          "'already_active': True}}",
          version);
    return fmt::format("Verified checkpoint and prepared host runtime: {{'target_version': {}, 'wall_s': {:.6f}}}",
                       version, report->seconds);
  }

  /// H: {weight_version (required str), abort_all_requests, flush_cache (false), torch_empty_cache} ->
  /// {success, message, num_paused_requests} (H:entrypoints/http_server.py:1174-1190;
  /// H:managers/io_struct.py:1543-1557); the version must be the prepared one, str(target_version)
  /// (H:weight_sync/host_runtime.py:242-258).
  HttpReply from_prepared(const HttpRequest& request) {
    const sglang::Body body(request);
    const std::string weight_version = body.required_string("weight_version");
    const bool abort_all = body.optional_bool("abort_all_requests", false);
    const bool flush_cache = body.optional_bool("flush_cache", false);
    const json extra{{"num_paused_requests", 0}};
    if (server_.engine_mode() != "cpu") {
      return sglang::update_reply(false,
                                  "Host runtime weight updates are disabled. Launch with "
                                  "--enable-host-runtime-weight-update.",
                                  extra);
    }
    std::optional<uint32_t> prepared;
    {
      std::lock_guard lock(mu_);
      prepared = runtime_prepared_;
    }
    if (!prepared || sglang::version_text(*prepared) != weight_version) {
      const std::string why = prepared ? fmt::format("prepared runtime version mismatch: requested={}, prepared={}",
                                                     weight_version, *prepared)
                                       : std::string("no host runtime version is prepared");
      return sglang::update_reply(
          false,
          fmt::format("Traceback (most recent call last):\n  (the embedded engine of wsbench serve)\n"
                      "RuntimeError: {}\n",
                      why),
          extra);
    }
    if (flush_cache && server_.flush_would_fail()) {
      return json_reply(500, json{{"success", false},
                                  {"message", "AssertionError: Cache flush failed after updating weights"},
                                  {"num_paused_requests", 0}});
    }
    CommitReport report;
    try {
      report = server_.run_update(abort_all, [&](PauseMode mode) {
        CommitReport r = server_.engine().commit(*prepared, mode);
        server_.set_served(*prepared, weight_version);
        return r;
      });
    } catch (const Error& e) {
      return json_reply(
          e.kind() == ErrorKind::Fatal ? 500 : 400,
          json{{"success", false}, {"message", sglang::traceback_message(e)}, {"num_paused_requests", 0}});
    }
    {
      std::lock_guard lock(mu_);
      runtime_prepared_.reset();
    }
    return sglang::update_reply(
        true,
        fmt::format("Committed prepared host runtime weights: {{'operation': 'commit', 'version': '{}', 'wall_s': "
                    "{:.6f}}} Weight version updated to {}.",
                    weight_version, report.seconds, weight_version),
        extra);
  }

  sglang::FamilyServer server_;
  bool host_runtime_;
  std::mutex mu_;                             // guards the members below
  std::optional<fs::path> local_dir_;         ///< the local checkpoint of the last pull
  std::optional<uint32_t> applied_;           ///< the version it holds
  std::optional<uint32_t> runtime_prepared_;  ///< H: the version the host image holds, not yet committed
};

}  // namespace

std::vector<Route> stitch_v0515_routes(ServeState& state, bool host_runtime) {
  auto server = std::make_shared<PullServer>(state, host_runtime);
  return sglang::owned_by(server, server->routes());
}

}  // namespace wsb
