#pragma once
// POST /update_weights_from_disk as every SGLang-family server answers it (wsbench serve's side): a reload of a
// checkpoint directory under SGLang's update locking, with the hooks by which a Stitch fork turns the reload of its
// own pulled or staged local checkpoint into the commit of the engine's prepared target.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "engine_api/protocols/sglang_family_routes.hpp"

namespace wsb::sglang {

struct DiskReloadHooks {
  /// A refusal before anything runs (`success: false` with this message), nullopt to go on.
  std::function<std::optional<std::string>()> refuse;
  /// The engine version already prepared for `model_path` (a fork's local checkpoint after a pull or a stage): the
  /// reload commits it (nothing is committed when it is the version served). nullopt: `model_path` is read as a
  /// FULL checkpoint (Engine::commit_checkpoint).
  std::function<std::optional<uint32_t>(const std::filesystem::path& model_path)> prepared_target;
};

/// Request {model_path (required), load_format, weight_version (str, null keeps the served text), flush_cache
/// (true), abort_all_requests (false), ...} (U:io:1533-1556); answer {success, message, num_paused_requests: 0},
/// 400 on failure (U:hs:1161-1187). Success says "Succeeded to update model weights." plus " Weight version updated
/// to V." when one was given (U:python/sglang/srt/model_executor/model_runner_components/weight_updater.py:181;
/// U:tm:1778-1780). A reload wsbench cannot read fails as SGLang's does before the load ("Failed to get weights
/// iterator: ...", that file :146-149); flush_cache true while an in_place pause holds requests is the scheduler's
/// failed assertion (U:io:1499-1500; U:python/sglang/srt/managers/scheduler_components/weight_updater.py:103-108),
/// answered 500 without touching the weights (the real scheduler dies after loading them).
HttpReply update_weights_from_disk(FamilyServer& server, const HttpRequest& request, const DiskReloadHooks& hooks = {});

}  // namespace wsb::sglang
