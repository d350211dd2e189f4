// wsbench serve --protocol stitch-staging: the fork started with --weight-update-staging disk|cpu over the embedded
// engine (the staging destination is the engine's mode, `wsbench serve --mode`). Its server source is known from a
// search-index copy only (modal-projects/sglang@1d420cc80,
// python/sglang/srt/managers/scheduler_components/weight_updater.py: `def prepare_weight_update`,
// `def commit_weight_update`, `def _staged_update_conflict`; "P" below); its client is Xiuyu-Li/stitch@3a05662
// src/stitch/engines/sglang.py.
#include <fmt/format.h>

#include <limits>

#include "core/errors.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_disk_reload.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "engine_api/protocols/sglang_family_routes.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

class StagingServer {
 public:
  /// parallelism_info per role (io_struct.py `class ChecksumInfo` of modal-projects/sglang@1d420cc80, a
  /// search-index copy).
  explicit StagingServer(ServeState& state) : server_(state) { server_.set_parallelism_per_role(); }

  std::vector<Route> routes() {
    std::vector<Route> routes = server_.common_routes([this](json& info) {
      // What the client checks before it serves (X: `def initialize_update_destination`).
      const std::string mode = server_.engine_mode();
      info["weight_update_staging"] = mode == "disk" || mode == "cpu" ? json(mode) : json(nullptr);
      info["weight_update_local_checkpoint_dir"] =
          mode == "disk" ? json((server_.state().workdir() / "engine-checkpoint").string()) : json(nullptr);
    });
    routes.push_back(
        {"POST", "/prepare_weight_update", sglang::validated([this](const HttpRequest& r) { return prepare(r); })});
    routes.push_back(
        {"POST", "/commit_weight_update", sglang::validated([this](const HttpRequest& r) { return commit(r); })});
    routes.push_back({"POST", "/update_weights_from_disk", sglang::validated([](const HttpRequest& r) {
                        // P refuses every other update path while staging is on (`def _staged_update_conflict`).
                        (void)sglang::Body(r).required_string("model_path");
                        return sglang::update_reply(false,
                                                    "update_weights_from_disk is unavailable while staged weight "
                                                    "updates are enabled; use prepare_weight_update and "
                                                    "commit_weight_update",
                                                    json{{"num_paused_requests", 0}});
                      })});
    return routes;
  }

 private:
  static HttpReply reply(bool success, const std::string& message, json rank_stats = json::array()) {
    return sglang::update_reply(success, message, json{{"rank_stats", std::move(rank_stats)}});
  }

  bool staging_enabled() const {
    const std::string mode = server_.engine_mode();
    return mode == "disk" || mode == "cpu";
  }

  /// The prepared version P would report: the engine's, while it is ahead of the served one.
  std::optional<uint32_t> prepared() {
    const auto p = server_.engine().mode().prepared_version();
    if (p && *p > server_.engine().weight_version()) return p;
    return std::nullopt;
  }

  /// {checkpoint_source_dir (required str), target_version (required int)} -> {success, message, rank_stats}, with
  /// P's refusals in its order.
  HttpReply prepare(const HttpRequest& request) {
    const sglang::Body body(request);
    const std::string source = body.required_string("checkpoint_source_dir");
    const int64_t target = body.required_int("target_version");
    if (!staging_enabled()) return reply(false, "Staged weight updates are not enabled.");
    if (source.empty()) return reply(false, "checkpoint_source_dir must not be empty.");
    if (!sglang::same_path(source, server_.updates_dir())) {
      return reply(false, fmt::format("wsbench serve: checkpoint_source_dir '{}' is not the folder of this server's "
                                      "publications ('{}')",
                                      source, server_.updates_dir().string()));
    }
    const uint32_t served = server_.engine().weight_version();
    if (const auto p = prepared()) {
      if (*p == target) return reply(true, fmt::format("Weight version {} is prepared.", target));
      if (target < *p) {
        return reply(false, fmt::format("Target version {} must not precede prepared version {}.", target, *p));
      }
    }
    if (target <= static_cast<int64_t>(served)) {
      return reply(false, fmt::format("Target version {} must follow served version {}.", target, served));
    }
    if (target > std::numeric_limits<uint32_t>::max()) {
      return reply(false, fmt::format("wsbench serve: target_version {} is beyond wsbench's versions", target));
    }
    json stats{{"rank", 0}, {"backend", server_.engine_mode()}, {"target_version", target}};
    PrepareReport report;
    try {
      report = server_.engine().prepare(static_cast<uint32_t>(target));
    } catch (const Error& e) {
      stats["stage"] = nullptr;
      stats["wall_s"] = 0.0;
      return reply(false, sglang::traceback_message(e), json::array({stats}));
    }
    server_.state().record_prepare(report);
    stats["stage"] = {{"operation", "wsbench_prepare"}};
    stats["wall_s"] = report.seconds;
    return reply(true, fmt::format("Prepared weight version {}.", target), json::array({stats}));
  }

  /// {target_version (required int), abort_all_requests, torch_empty_cache, flush_cache} -> {success, message,
  /// rank_stats}: preflight (the target must be the prepared one), the flush before the commit, the commit; the
  /// served version becomes str(target_version).
  HttpReply commit(const HttpRequest& request) {
    const sglang::Body body(request);
    const int64_t target = body.required_int("target_version");
    const bool abort_all = body.optional_bool("abort_all_requests", false);
    (void)body.optional_bool("torch_empty_cache", false);
    // Default true (io_struct.py `class CommitWeightUpdateReqInput` of modal-projects/sglang@1d420cc80, a
    // search-index copy); the client always sends false.
    const bool flush_cache = body.optional_bool("flush_cache", true);
    if (!staging_enabled()) return reply(false, "Staged weight updates are not enabled.");
    const auto p = prepared();
    if (!p || *p != target) {
      return reply(false, fmt::format("Traceback (most recent call last):\n  (the embedded engine of wsbench serve)\n"
                                      "RuntimeError: Weight version {} is not prepared; prepared={}.\n",
                                      target, p ? std::to_string(*p) : std::string("None")));
    }
    if (flush_cache && server_.flush_would_fail()) return reply(false, "Cache flush failed before weight commit.");
    CommitReport report;
    try {
      report = server_.run_update(abort_all, [&](PauseMode mode) {
        CommitReport r = server_.engine().commit(*p, mode);
        server_.set_served(*p, sglang::version_text(*p));
        return r;
      });
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Fatal) {
        return json_reply(500, json{{"success", false},
                                    {"message", std::string("weight commit failed; terminating the engine to avoid "
                                                            "serving mixed weights:\n") +
                                                    e.what()},
                                    {"rank_stats", json::array()}});
      }
      return reply(false, sglang::traceback_message(e));
    }
    const json stats{
        {"rank", 0},
        {"backend", server_.engine_mode()},
        {"target_version", target},
        {"commit",
         {{"operation", fmt::format("commit_{}_weight_update", server_.engine_mode())}, {"wall_s", report.seconds}}},
        {"wall_s", report.seconds}};
    return reply(true, fmt::format("Committed weight version {}.", target), json::array({stats}));
  }

  sglang::FamilyServer server_;
};

}  // namespace

std::vector<Route> stitch_staging_routes(ServeState& state) {
  auto server = std::make_shared<StagingServer>(state);
  return sglang::owned_by(server, server->routes());
}

}  // namespace wsb
