#pragma once
// The wire every SGLang-based protocol shares (upstream SGLang and the Stitch fork generations): /generate,
// /model_info, /weights_checker, /pause_generation and /continue_generation, as the client tables build and parse
// them, and the answer shapes wsbench serve's routes write (sglang_family_routes.hpp), so both sides keep one
// definition. Keys of the sources cited below (repo@commit):
//   U  modal-projects/sglang@8905cbd42 (upstream main)      F  modal-projects/sglang@557e19e1b
//   (stitch-sglang-v0.5.15-post1) H  modal-projects/sglang@1d2290684 (…-post1-host-runtime)  S
//   modal-projects/stitch@a250dc3 (the Stitch client) X  Xiuyu-Li/stitch@3a05662 (the Stitch client of the
//   --weight-update-staging fork)
// with hs = python/sglang/srt/entrypoints/http_server.py, io = python/sglang/srt/managers/io_struct.py,
// tm = python/sglang/srt/managers/tokenizer_manager.py, sb = python/sglang/srt/managers/schedule_batch.py.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_api/protocols/protocol.hpp"

namespace wsb::sglang {

/// Read timeouts of the Stitch client (S:src/stitch/engines/sglang.py:21-25): control calls (pause, continue),
/// staging (a prepare) and weight updates (a commit), seconds.
inline constexpr double kControlTimeoutS = 120;
inline constexpr double kStageTimeoutS = 3600;
inline constexpr double kUpdateTimeoutS = 600;

/// The version text the Stitch clients send and the forks store: the plain decimal of `version` ("7"), never
/// wsbench's six digits (S:src/stitch/engines/sglang.py:121; H:python/sglang/srt/weight_sync/host_runtime.py:211).
std::string version_text(uint32_t version);

/// POST /generate of the fixed greedy probe: {input_ids, sampling_params{temperature: 0, max_new_tokens,
/// ignore_eos: true}, return_logprob, logprob_start_len: -1} (io:154-212; the Stitch profiler's probe,
/// S:tools/profiling/_delta_weight_update.py:183-221), with the X-Wsbench-Extras header set so that wsbench serve
/// adds its step times, restarts and per-step versions (real servers ignore the header).
HttpRequest generate_request(const GenerateRequest& request);

/// A /generate answer: {text, output_ids, meta_info{weight_version: str, finish_reason{type, ...},
/// output_token_logprobs: [[logprob, id, text|null]], ...}} (tm:1926-1932, 2220; sb:193-220). finish_reason.type
/// "abort" becomes "abort", every other type ("length", "stop") "length"; the optional wsbench extras
/// meta_info.wsbench_step_times (CLOCK_MONOTONIC seconds of each forward step, taken to this process's
/// steady_seconds()), wsbench_restarts and
/// wsbench_step_versions (strings, one per forward step, prompt steps first) fill step_times, restarts and
/// step_versions. Throws Error(Format) naming the
/// endpoint and the field when a field is missing or has another type, or when a logprob entry names another token
/// than output_ids.
GenerateResult parse_generate(const nlohmann::json& reply);

/// GET /model_info (hs:693-720).
HttpRequest model_info_request();
/// Its `weight_version`: a string ("default" when the server booted without --weight-version) or, from a fork
/// that reports one, an integer. Throws Error(Format) when absent or of another type.
WeightVersion parse_model_info(const nlohmann::json& reply);

/// POST /weights_checker {action: "checksum"} (io:1754-1784; hs:1433-1449).
HttpRequest checksum_request();
/// {success, message, ranks: [{checksums: {name: 16 hex}, per_gpu_checksum, parallelism_info{tp_rank, ...}}],
/// per_engine_checksum}, ranks in TP order (U: python/sglang/srt/utils/weight_checker.py:121-156; the same shape
/// on F and H: python/sglang/srt/managers/tokenizer_control_mixin.py:762-783 there; the staging fork lists
/// parallelism_info per role). Index = the (first role's) parallelism_info.tp_rank when present. Throws Error(State) on
/// success false, Error(Format) for a missing field.
RankChecksums parse_checksums(const nlohmann::json& reply);

/// POST /pause_generation {mode} (io:1490-1509; hs:1612-1622). `mode` is retract, in_place or abort; drain has no
/// pause call (Error(Format) for it).
HttpRequest pause_request(PauseMode mode);
/// POST /continue_generation {} (io:1510-1516; hs:1625-1635).
HttpRequest continue_request();

/// The calls of one commit under `pause`: drain sends `commits` alone (the server's model-update writer lock
/// drains requests in flight, tm:1767-1776); every other mode wraps them in /pause_generation {mode} and
/// /continue_generation {} (the Stitch client's in_place commit, S:src/stitch/sync.py:163-173).
std::vector<CommitCall> paused_commit(PauseMode pause, std::vector<HttpRequest> commits);

/// The SGLang pause modes in the order wsbench lists them: drain, retract, in_place, abort.
const std::vector<PauseMode>& family_pause_modes();

/// The part every SGLang-family client table shares: health, generate, weight version, checksums, reply checks.
/// Subclasses give the modes, the prepare and the commit.
class FamilyProtocol : public Protocol {
 public:
  std::vector<PauseMode> pause_modes() const override { return family_pause_modes(); }
  HttpRequest generate(const GenerateRequest& request) const override { return generate_request(request); }
  GenerateResult parse_generate(const nlohmann::json& reply) const override { return sglang::parse_generate(reply); }
  HttpRequest weight_version() const override { return model_info_request(); }
  WeightVersion parse_weight_version(const nlohmann::json& reply) const override { return parse_model_info(reply); }
  std::optional<HttpRequest> checksums() const override { return checksum_request(); }
  RankChecksums parse_checksums(const nlohmann::json& reply) const override { return sglang::parse_checksums(reply); }
  /// Pause and continue answer {"message", "status": "ok"} (hs:1612-1635); every update endpoint
  /// {success, message, ...} (success false comes with HTTP 400, hs:1161-1187).
  void check_update_reply(const HttpRequest& request, const nlohmann::json& reply) const override;
  /// GET/POST /flush_cache answers text/plain (hs:895-911).
  bool plain_text(const HttpRequest& request) const override { return request.path == "/flush_cache"; }
};

}  // namespace wsb::sglang
