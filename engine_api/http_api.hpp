#pragma once
// The HTTP engine API (SGLang-fork shapes) as JSON: what `wsbench serve` answers and what HttpEngineClient sends
// and accepts. Both sides use these functions, so the wire format lives in one place. Parsers are strict: a field
// that is missing or of the wrong type throws Error(Format) naming the endpoint and the field.
//
// Required of any server (an SGLang-fork build):
//   POST /generate {input_ids, sampling_params: {max_new_tokens, temperature: 0}, return_logprob}
//        -> {text, output_ids, meta_info: {weight_version, output_token_logprobs: [[logprob, id, text|null], ...]}}
//        (text: invalid UTF-8 sent as U+FFFD; fingerprints of HTTP engines are taken over the text as received)
//   POST /prepare_weight_update {checkpoint_source_dir, target_version} -> {success, message}
//   POST /commit_weight_update {target_version, abort_all_requests, flush_cache} -> {success, message}
//   POST /weights_checker {action: "checksum"} -> {success, checksums: [{storage name: hex}, ...] (index = TP rank)}
//   GET /model_info -> {weight_version, ...};  POST /flush_cache -> {success};  GET /health -> 200 when serving
//   Errors: a 4xx/5xx status with {success: false, message}; `error_kind` (wsb::error_kind_name) when known.
// Optional wsbench extras (a fork may omit them; the profiler then skips what needs them):
//   meta_info.wsbench_step_times (CLOCK_MONOTONIC seconds of every decode step: comparable with the client's clock
//   on the same host, outside sandboxes with a clock of their own), meta_info.wsbench_restarts,
//   wsbench_seconds / wsbench_pause_seconds / wsbench_phases in prepare and commit responses,
//   GET /wsbench/storage_pointers, GET /wsbench/mode_memory, GET /wsbench/boot_phases.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.hpp"
#include "core/errors.hpp"

namespace wsb::api {

/// A weight version on the wire: an integer, or a string of decimal digits ("000001", "1"). Throws Error(Format)
/// naming `where` otherwise.
uint32_t parse_version(const nlohmann::json& j, const std::string& where);
/// The form servers send: the six-digit string of version_string().
nlohmann::json version_json(uint32_t version);

/// Reverse of error_kind_name; nullopt for an unknown name.
std::optional<ErrorKind> parse_error_kind(const std::string& name);

nlohmann::json generate_request_json(const GenerateRequest& request);
/// Throws Error(Format) naming `endpoint` and the field (a temperature other than 0 too: greedy only).
GenerateRequest parse_generate_request(const nlohmann::json& j, const std::string& endpoint);
nlohmann::json generate_response_json(const GenerateResponse& response);
/// Step times and restarts are optional (wsbench extras): absent, step_times is empty and restarts 0. Step times
/// are steady_seconds() of this process on both sides (CLOCK_MONOTONIC on the wire).
GenerateResponse parse_generate_response(const nlohmann::json& j, const std::string& endpoint);

nlohmann::json phases_json(const std::vector<PhaseRecord>& phases);
std::vector<PhaseRecord> parse_phases(const nlohmann::json& j, const std::string& where);

nlohmann::json prepare_response_json(const PrepareReport& report);
/// `success` must be true; wsbench extras (seconds, phases, already_prepared) default when absent.
PrepareReport parse_prepare_response(const nlohmann::json& j, uint32_t target, const std::string& endpoint);
nlohmann::json commit_response_json(const CommitReport& report);
CommitReport parse_commit_response(const nlohmann::json& j, uint32_t target, const std::string& endpoint);

nlohmann::json checksums_json(const std::vector<std::map<std::string, std::string>>& checksums);
std::vector<std::map<std::string, std::string>> parse_checksums(const nlohmann::json& j, const std::string& endpoint);

nlohmann::json pointers_json(const std::vector<std::vector<StoragePointer>>& pointers);
std::vector<std::vector<StoragePointer>> parse_pointers(const nlohmann::json& j, const std::string& endpoint);

nlohmann::json mode_memory_json(const ModeMemory& memory);
ModeMemory parse_mode_memory(const nlohmann::json& j, const std::string& endpoint);

/// The body of an error response: {success: false, message, error_kind}.
nlohmann::json error_json(const std::string& message, std::optional<ErrorKind> kind);

}  // namespace wsb::api
