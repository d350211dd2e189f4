// wsbench serve --protocol stitch-v0.5.16: the stage/cpu fork over the embedded engine. Its server source is known
// from a search-index copy only (modal-projects/sglang@0175e31e9,
// python/sglang/srt/managers/scheduler_components/weight_updater.py: `def stage_weight_update`,
// `def _stage_weight_update_preflight_message`, `def update_weights_from_cpu`; "G" below) and its API from
// modal-projects/stitch@a250dc3 cookbook/common/SGLANG_FORK.md:39-72. A stage is Engine::prepare of the target in
// the mode the engine runs (destination disk needs `--mode disk`, cpu `--mode cpu`: the fork's
// --enable-cpu-weight-cache); the commits are Engine::commit of the staged target.
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

/// G's refusal of the other update paths while its CPU cache is on (`def _cpu_weight_cache_conflict`).
constexpr const char* kCpuCacheConflict =
    "update_weights_from_disk is unavailable while the CPU weight cache is enabled. Stage and commit CPU weight "
    "updates through their dedicated APIs, or launch without --enable-cpu-weight-cache.";

class StageServer {
 public:
  explicit StageServer(ServeState& state) : server_(state) {}

  std::vector<Route> routes() {
    std::vector<Route> routes = server_.common_routes();
    routes.push_back(
        {"POST", "/stage_weight_update", sglang::validated([this](const HttpRequest& r) { return stage(r); })});
    routes.push_back({"POST", "/update_weights_from_disk", sglang::validated([this](const HttpRequest& r) {
                        sglang::DiskReloadHooks hooks;
                        hooks.refuse = [this]() -> std::optional<std::string> {
                          if (server_.engine_mode() == "cpu") return std::string(kCpuCacheConflict);
                          return std::nullopt;
                        };
                        hooks.prepared_target = [this](const fs::path& model_path) { return staged_into(model_path); };
                        return sglang::update_weights_from_disk(server_, r, hooks);
                      })});
    routes.push_back(
        {"POST", "/update_weights_from_cpu", sglang::validated([this](const HttpRequest& r) { return from_cpu(r); })});
    return routes;
  }

 private:
  std::optional<uint32_t> staged_into(const fs::path& model_path) {
    std::lock_guard lock(mu_);
    if (!local_dir_ || !staged_ || !sglang::same_path(model_path, *local_dir_)) return std::nullopt;
    return staged_;
  }

  /// {success, message, rank_stats: [one entry of this scheduler]} (G `def _stage_weight_update_sync`).
  static HttpReply stage_reply(bool success, const std::string& message, json stats) {
    return sglang::update_reply(success, message,
                                json{{"rank_stats", stats.is_null() ? json::array() : json::array({stats})}});
  }

  /// {base_checkpoint_dir, base_version (0), target_version, destination ("disk" | "cpu"), checkpoint_source_dir,
  /// local_checkpoint_dir}; the refusals of G's preflight, in its order.
  HttpReply stage(const HttpRequest& request) {
    const sglang::Body body(request);
    const std::optional<std::string> base_dir = body.optional_string("base_checkpoint_dir");
    const int64_t base = body.optional_int("base_version").value_or(0);
    const int64_t target = body.required_int("target_version");
    const std::string destination = body.literal("destination", {"disk", "cpu"}, "disk");
    const std::optional<std::string> source = body.optional_string("checkpoint_source_dir");
    const std::optional<std::string> local = body.optional_string("local_checkpoint_dir");
    const std::string mode = server_.engine_mode();
    std::string refusal;
    if (target < 0) {
      refusal = "target_version must be non-negative.";
    } else if (base < 0) {
      refusal = "base_version must be non-negative.";
    } else if (target < base) {
      refusal = "target_version must not precede base_version.";
    } else if (target > base && !source) {
      refusal = "checkpoint_source_dir is required after the base version.";
    } else if (destination == "disk" && !local) {
      refusal = "local_checkpoint_dir is required for disk staging.";
    } else if (destination == "disk" && mode == "cpu") {
      refusal = "Disk staging is unavailable while the CPU weight cache is enabled.";
    } else if (destination == "cpu" && mode != "cpu") {
      refusal = "CPU staging requires --enable-cpu-weight-cache.";
    }
    if (refusal.empty() && target > std::numeric_limits<uint32_t>::max()) {
      refusal = fmt::format("wsbench serve: target_version {} is beyond wsbench's versions", target);
    }
    // What wsbench's engine can stage: from its own boot checkpoint and version, out of its own store.
    if (refusal.empty() && base_dir && !sglang::same_path(*base_dir, server_.state().boot_checkpoint())) {
      refusal = fmt::format(
          "wsbench serve: base_checkpoint_dir '{}' is not the checkpoint this server booted from "
          "('{}')",
          *base_dir, server_.state().boot_checkpoint().string());
    }
    if (refusal.empty() && base != server_.boot_version()) {
      refusal = fmt::format("wsbench serve: base_version {} is not the version this server booted at ({})", base,
                            server_.boot_version());
    }
    if (refusal.empty() && source && target > base && !sglang::same_path(*source, server_.updates_dir())) {
      refusal = fmt::format(
          "wsbench serve: checkpoint_source_dir '{}' is not the folder of this server's "
          "publications ('{}')",
          *source, server_.updates_dir().string());
    }
    if (!refusal.empty()) return stage_reply(false, refusal, nullptr);

    const auto version = static_cast<uint32_t>(target);
    json stats{{"rank", 0}, {"base_version", base}, {"target_version", target}, {"destination", destination}};
    if (target == base) {
      // The base stage initializes the destination (a seeded local checkpoint, or the CPU cache captured from the
      // live weights); wsbench's engine set its mode up at the native load.
      std::lock_guard lock(mu_);
      if (local) local_dir_ = fs::path(*local);
      stats["stage"] = {{"operation", destination == "cpu" ? "initialize_cpu_weight_cache" : "materialize"},
                        {"initialized", false}};
      stats["wall_s"] = 0.0;
      return stage_reply(true, "Success.", stats);
    }
    PrepareReport report;
    try {
      report = server_.engine().prepare(version);
    } catch (const Error& e) {
      stats["wall_s"] = 0.0;
      return stage_reply(false, sglang::traceback_message(e), stats);
    }
    server_.state().record_prepare(report);
    {
      std::lock_guard lock(mu_);
      if (local) local_dir_ = fs::path(*local);
      staged_ = version;
    }
    stats["stage"] = {{"operation", "wsbench_prepare"}, {"already_prepared", report.already_prepared}};
    stats["wall_s"] = report.seconds;
    return stage_reply(true, "Success.", stats);
  }

  /// {target_version (required int), flush_cache, abort_all_requests, torch_empty_cache} ->
  /// {success, message, rank_stats} (G `def update_weights_from_cpu`): preflight, the flush before the commit, then
  /// the copy; the served version becomes str(target_version).
  HttpReply from_cpu(const HttpRequest& request) {
    const sglang::Body body(request);
    const int64_t target = body.required_int("target_version");
    const bool flush_cache = body.optional_bool("flush_cache", false);
    const bool abort_all = body.optional_bool("abort_all_requests", false);
    auto refuse = [](const std::string& message) {
      return sglang::update_reply(false, message, json{{"rank_stats", json::array()}});
    };
    if (server_.engine_mode() != "cpu") return refuse("CPU weight cache is not initialized.");
    std::optional<uint32_t> staged;
    {
      std::lock_guard lock(mu_);
      staged = staged_;
    }
    if (target < 0 || !staged || *staged != target) {
      return refuse(fmt::format("wsbench serve: CPU weight version {} is not staged (staged: {})", target,
                                staged ? std::to_string(*staged) : std::string("none")));
    }
    if (flush_cache && server_.flush_would_fail()) return refuse("Cache flush failed before CPU weight commit.");
    CommitReport report;
    try {
      report = server_.run_update(abort_all, [&](PauseMode mode) {
        CommitReport r = server_.engine().commit(*staged, mode);
        server_.set_served(*staged, sglang::version_text(*staged));
        return r;
      });
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Fatal) {
        return json_reply(500, json{{"success", false},
                                    {"message", std::string("CPU weight commit failed; terminating the engine to avoid "
                                                            "serving a mixed model. ") +
                                                    e.what()},
                                    {"rank_stats", json::array()}});
      }
      return refuse(sglang::traceback_message(e));
    }
    {
      std::lock_guard lock(mu_);
      staged_.reset();
    }
    return sglang::update_reply(true, "Success.",
                                json{{"rank_stats", json::array({{{"rank", 0}, {"wall_s", report.seconds}}})}});
  }

  sglang::FamilyServer server_;
  std::mutex mu_;                      // guards the members below
  std::optional<fs::path> local_dir_;  ///< the local checkpoint of the disk stages
  std::optional<uint32_t> staged_;     ///< the target staged and not yet committed
};

}  // namespace

std::vector<Route> stitch_v0516_routes(ServeState& state) {
  auto server = std::make_shared<StageServer>(state);
  return sglang::owned_by(server, server->routes());
}

}  // namespace wsb
