// `wsbench serve --protocol vllm`: the embedded engine behind the vLLM endpoints an RL client drives (vllm.cpp has
// the call sequence and the sources; short hashes as in vllm_wire.hpp, all vllm-project/vllm). What a real vLLM does
// and what this answers with the embedded engine:
// - POST /pause?mode=abort|wait|keep closes the scheduler gate with engine.pause(Abort | Drain | InPlace) and holds
//   it; POST /resume opens it. The reload of that pause is recorded for GET /wsbench/last_update at /resume, with
//   the gate's closed time as its pause (a real server reports none).
// - POST /collective_rpc {method: "reload_weights", kwargs: {weights_path}} is engine.commit_checkpoint: inside the
//   held pause when paused (its mode applies), else under in_place, as vLLM runs a collective RPC between two steps
//   with the running requests kept. The reported version stays until /update_weight_version (or
//   /finish_weight_update's weight_version) sets it, as in vLLM; the engine needs a fresh number for the new weights
//   at once, which is reported under the old text until then.
// - /start_weight_update, /update_weights {update_info: {path}}, /finish_weight_update follow the shared-disk
//   backend's session rules (vllm-project/vllm@3b98defb1248:vllm/distributed/weight_transfer/disk_engine.py, a draft
//   backend): one checkpoint per session, loaded at /update_weights.
// - Errors: HTTPException details as {"error": {message, type: the status phrase, param: null, code}}
//   (vllm-project/vllm@0f17ee061e41:vllm/entrypoints/serve/exception_handling/handlers/http.py:16-31); request
//   validation errors as 400 with the same object, message "1 validation error: ..." and param "body.FIELD" or
//   "query.FIELD" (vllm-project/vllm@4da14a5cf11a:vllm/entrypoints/serve/exception_handling/handlers/validation.py
//   `def validation_exception_handler`); /pause and /resume answer {"error": str} themselves (0100a21:
//   vllm/entrypoints/serve/dev/rlhf/api_router.py:65-94).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <memory>
#include <mutex>

#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/vllm_wire.hpp"
#include "models/forward/forward.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

std::string status_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    default: return "Error";
  }
}

/// vLLM's ErrorResponse: {"error": {message, type, param, code}}.
HttpReply error_reply(int status, const std::string& message, const std::string& type,
                      const std::optional<std::string>& param = std::nullopt) {
  json error{{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (param) error["param"] = *param;
  return json_reply(status, json{{"error", error}});
}

/// An HTTPException raised by a route: the type is the status phrase.
HttpReply http_error(int status, const std::string& detail) { return error_reply(status, detail, status_phrase(status)); }

/// Python's repr of a JSON value, as the messages built with `{x!r}` or `str(dict)` show it.
std::string py_repr(const json& j) {
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (char c : s) {
      if (c == quote || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back(quote);
    return out;
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + py_repr(j[i]);
    return out + "]";
  }
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      out += (first ? "" : ", ") + py_repr(json(k)) + ": " + py_repr(v);
      first = false;
    }
    return out + "}";
  }
  return j.dump();
}

/// Python's type name of a JSON value (AttributeError messages).
std::string py_type(const json& j) {
  if (j.is_null()) return "NoneType";
  if (j.is_boolean()) return "bool";
  if (j.is_string()) return "str";
  if (j.is_array()) return "list";
  if (j.is_number_integer()) return "int";
  if (j.is_number()) return "float";
  return "dict";
}

/// One pydantic validation error as FastAPI reports it through vLLM's handler.
HttpReply validation_error(const std::string& loc, const std::string& type, const std::string& msg,
                           const json& input) {
  const std::string entry = fmt::format("{{'type': '{}', 'loc': '{}', 'msg': {}, 'input': {}}}", type, loc,
                                        py_repr(json(msg)), py_repr(input));
  return error_reply(400, "1 validation error:\n  " + entry, status_phrase(400), loc);
}

/// A boolean query parameter as pydantic reads it: nullopt plus `error` set when the text is not a boolean.
std::optional<bool> query_bool(const HttpRequest& request, const std::string& key, bool fallback,
                               std::optional<HttpReply>& error) {
  const auto value = request.query_value(key);
  if (!value) return fallback;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* t : {"1", "on", "t", "true", "y", "yes"}) {
    if (v == t) return true;
  }
  for (const char* f : {"0", "off", "f", "false", "n", "no"}) {
    if (v == f) return false;
  }
  error = validation_error("query." + key, "bool_parsing",
                           "Input should be a valid boolean, unable to interpret input", json(*value));
  return std::nullopt;
}

/// What the routes share beyond ServeState.
struct Server {
  explicit Server(ServeState& s) : state(s) {}
  ServeState& state;
  std::mutex reload_mu;  // one reload at a time: each needs its own fresh engine version
  std::mutex mu;         // guards the members below
  std::optional<CommitReport> reload_in_pause;  ///< recorded at /resume with the gate's closed time
  bool session_active = false;                  ///< between /start_weight_update and /finish_weight_update
  bool session_loaded = false;                  ///< the session's /update_weights loaded its checkpoint
  uint64_t completions = 0;

  /// Reloads every weight from `dir` (nothing changes when the checkpoint lacks a tensor): inside the held pause,
  /// else under in_place. The reported version is kept until a version call sets it.
  void reload(const std::filesystem::path& dir) {
    std::lock_guard serial(reload_mu);
    const uint32_t engine_version = state.engine_version_for(std::nullopt);
    const WeightVersion reported = state.served_version();
    const bool held = state.engine().paused();
    CommitReport report = state.engine().commit_checkpoint(dir, engine_version, PauseMode::InPlace);
    state.set_served(engine_version, reported);
    if (held) {
      std::lock_guard lock(mu);
      reload_in_pause = report;
    } else {
      state.record_commit(report);
    }
  }
};

/// The reply of an engine failure inside a request vLLM would have raised from: 500.
HttpReply internal_error(const std::exception& e) { return error_reply(500, e.what(), "InternalServerError"); }

// POST /pause (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:31-75).
HttpReply pause(Server& server, const HttpRequest& request) {
  const std::string mode_text = request.query_value("mode").value_or("abort");
  auto mode = vllm::pause_mode_of(mode_text);
  if (!mode) {
    return validation_error("query.mode", "literal_error", "Input should be 'abort', 'wait' or 'keep'",
                            json(mode_text));
  }
  std::optional<HttpReply> error;
  const auto wait_inflight = query_bool(request, "wait_for_inflight_requests", false, error);
  if (error) return *error;
  query_bool(request, "clear_cache", true, error);  // no prefix cache here: validated, nothing to clear
  if (error) return *error;
  if (*wait_inflight) mode = PauseMode::Drain;  // the deprecated flag means mode=wait (async_llm.py)
  try {
    // A second pause keeps the first one's gate (vLLM's scheduler is paused already).
    if (!server.state.engine().paused()) {
      server.state.engine().pause(*mode);
      server.state.set_pause_mode(*mode);
      std::lock_guard lock(server.mu);
      server.reload_in_pause.reset();
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::State) {
      return json_reply(500, json{{"error", fmt::format("Failed to pause generation: {}", e.what())}});
    }
    // State: a concurrent /pause closed the gate first.
  }
  return json_reply(200, json{{"status", "paused"}});
}

// POST /resume (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:78-94).
HttpReply resume(Server& server, const HttpRequest&) {
  try {
    if (server.state.engine().paused()) {
      const double closed = server.state.engine().resume();
      server.state.set_pause_mode(std::nullopt);
      std::optional<CommitReport> report;
      {
        std::lock_guard lock(server.mu);
        report.swap(server.reload_in_pause);
      }
      if (report) {
        report->pause_seconds = closed;
        server.state.record_commit(*report);
      }
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::State) {
      return json_reply(500, json{{"error", fmt::format("Failed to resume generation: {}", e.what())}});
    }
  }
  return json_reply(200, json{{"status", "resumed"}});
}

// POST /collective_rpc (09cb327:vllm/entrypoints/serve/rpc/api_router.py:25-57).
HttpReply collective_rpc(Server& server, const HttpRequest& request) {
  if (!request.body) return http_error(400, "JSON decode error: Expecting value: line 1 column 1 (char 0)");
  const json& body = *request.body;
  if (!body.is_object()) {
    return error_reply(500, fmt::format("'{}' object has no attribute 'get'", py_type(body)), "InternalServerError");
  }
  const json method = body.value("method", json());
  if (method.is_null()) return http_error(400, "Missing 'method' in request body");
  if (method != "reload_weights") {
    return error_reply(500, fmt::format("wsbench serve runs no worker method {} (only 'reload_weights')",
                                        py_repr(method)), "InternalServerError");
  }
  const json args = body.value("args", json::array());
  if (!args.is_array() || !args.empty()) {
    // reload_weights' first positional parameter is a weights iterator, which cannot travel as JSON.
    return error_reply(500, "reload_weights: pass the checkpoint as kwargs.weights_path", "InternalServerError");
  }
  const json kwargs = body.value("kwargs", json::object());
  if (!kwargs.is_object()) {
    return error_reply(500, fmt::format("argument after ** must be a mapping, not {}", py_type(kwargs)),
                       "InternalServerError");
  }
  // No weights_path: the checkpoint the server booted from (the model path), as vLLM's reload does.
  std::filesystem::path dir = server.state.boot_checkpoint();
  if (auto it = kwargs.find("weights_path"); it != kwargs.end() && !it->is_null()) {
    if (!it->is_string()) {
      return error_reply(500, fmt::format("weights_path must be a str, got {}", py_type(*it)), "InternalServerError");
    }
    dir = it->get<std::string>();
  }
  try {
    server.reload(dir);
  } catch (const std::exception& e) {
    return internal_error(e);
  }
  const size_t workers = server.state.engine().layouts().size();  // reload_weights returns None on each
  return json_reply(200, json{{"results", json(std::vector<json>(workers, nullptr))}});
}

// POST /update_weight_version (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:215-221).
HttpReply update_weight_version(Server& server, const HttpRequest& request) {
  const json body = request.body.value_or(json());
  const json value = body.is_object() ? body.value("new_version", json()) : json();
  if (!body.is_object() || !body.contains("new_version")) {
    return validation_error("body.new_version", "missing", "Field required", json());
  }
  if (!value.is_string()) {
    return validation_error("body.new_version", "string_type", "Input should be a valid string", value);
  }
  const std::string text = value.get<std::string>();
  server.state.set_served(server.state.engine().weight_version(), WeightVersion::parse(text));
  return json_reply(200, json{{"success", true}, {"new_version", text}});
}

// GET /weight_info (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:224-227): null until a version was set,
// which is how a server booted without --weight-version ("default") answers.
HttpReply weight_info(Server& server, const HttpRequest&) {
  const WeightVersion served = server.state.served_version();
  return json_reply(200, json{{"weight_version", served.is_default() ? json() : json(served.text)}});
}

// POST /reset_prefix_cache (09cb327:vllm/entrypoints/serve/cache/api_router.py:22-46): the embedded engine keeps no
// prefix cache, so there is nothing to reset; the query is validated as vLLM does.
HttpReply reset_prefix_cache(Server&, const HttpRequest& request) {
  std::optional<HttpReply> error;
  for (const char* key : {"reset_running_requests", "reset_external"}) {
    query_bool(request, key, false, error);
    if (error) return *error;
  }
  return text_reply(200, "");
}

// POST /init_weight_transfer_engine (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:158-173).
HttpReply init_weight_transfer_engine(Server&, const HttpRequest& request) {
  if (!request.body) return http_error(400, "Invalid JSON format");
  if (!request.body->is_object() || request.body->value("init_info", json()).is_null()) {
    return http_error(400, "Missing 'init_info' in request body");
  }
  return json_reply(200, json{{"message", "Weight transfer initialized"}});
}

// POST /start_weight_update (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:176-179).
HttpReply start_weight_update(Server& server, const HttpRequest&) {
  std::lock_guard lock(server.mu);
  if (server.session_active) return error_reply(500, "A shared-disk weight update is already active", "InternalServerError");
  server.session_active = true;
  server.session_loaded = false;
  return json_reply(200, json{{"message", "Weight update started"}});
}

// POST /update_weights (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:188-203), update_info as the
// shared-disk backend reads it: {path: an absolute directory holding safetensors}.
HttpReply update_weights(Server& server, const HttpRequest& request) {
  if (!request.body) return http_error(400, "Invalid JSON format");
  const json info = request.body->is_object() ? request.body->value("update_info", json()) : json();
  if (info.is_null()) return http_error(400, "Missing 'update_info' in request body");
  const json path = info.is_object() ? info.value("path", json()) : json();
  const auto bad = [&](const std::string& message) {
    std::lock_guard lock(server.mu);
    server.session_active = server.session_loaded = false;  // the backend ends a failed session
    return error_reply(400, message, "BadRequestError");
  };
  if (!path.is_string() || path.get<std::string>().empty()) {
    return bad("`path` must be a non-empty absolute local directory (wsbench serve reloads from disk only: no "
               "NCCL or IPC transport)");
  }
  const std::filesystem::path dir = path.get<std::string>();
  if (!dir.is_absolute()) return bad("`path` must be an absolute local directory");
  if (!std::filesystem::is_directory(dir)) {
    return bad(fmt::format("Shared-disk checkpoint path must be a local directory: {}", dir.string()));
  }
  {
    std::lock_guard lock(server.mu);
    if (!server.session_active) {
      return error_reply(500, "start_weight_update must be called before loading a checkpoint", "InternalServerError");
    }
    if (server.session_loaded) {
      return error_reply(500, "The disk backend accepts exactly one checkpoint per update session",
                         "InternalServerError");
    }
  }
  try {
    server.reload(dir);
  } catch (const std::exception& e) {
    std::lock_guard lock(server.mu);
    server.session_active = server.session_loaded = false;
    return internal_error(e);
  }
  std::lock_guard lock(server.mu);
  server.session_loaded = true;
  return json_reply(200, json{{"message", "Weights updated"}});
}

// POST /finish_weight_update {weight_version: str | null} (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:
// 206-212; the version is set after the finish, vllm-project/vllm@00080ee13c7a:vllm/v1/engine/async_llm.py
// `def finish_weight_update`).
HttpReply finish_weight_update(Server& server, const HttpRequest& request) {
  const json version = request.body && request.body->is_object() ? request.body->value("weight_version", json()) : json();
  if (!version.is_null() && !version.is_string()) {
    return validation_error("body.weight_version", "string_type", "Input should be a valid string", version);
  }
  {
    std::lock_guard lock(server.mu);
    if (!server.session_active) return error_reply(500, "No shared-disk weight update is active", "InternalServerError");
    const bool loaded = server.session_loaded;
    server.session_active = server.session_loaded = false;
    if (!loaded) {
      return error_reply(500, "No checkpoint was loaded during the shared-disk update session", "InternalServerError");
    }
  }
  if (version.is_string()) {
    server.state.set_served(server.state.engine().weight_version(), WeightVersion::parse(version.get<std::string>()));
  }
  return json_reply(200, json{{"message", "Weight update finished"}});
}

/// The checksum keys of rank `rank`'s storages (0888bfb key form, with the `ep` field of later sources).
std::string checksum_key(size_t rank, const std::string& name) { return fmt::format("dp0:pp0:pcp0:tp{}:ep0:{}", rank, name); }

// POST /weight_checker (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py `def weight_checker`). The digests
// are the engine's xxh3-128 per runtime storage, not SHA-256 per parameter: equal weights give equal digests either
// way, which is all a caller compares.
HttpReply weight_checker(Server& server, const HttpRequest& request) {
  if (!request.body) return http_error(400, "Invalid JSON");
  const json& body = *request.body;
  if (!body.is_object()) return http_error(400, "Expected a JSON object");
  const json action = body.value("action", json());
  if (action != "checksum" && action != "reset" && action != "compare") {
    return http_error(400, fmt::format("action must be one of checksum|reset|compare, got {}", py_repr(action)));
  }
  if (server.state.engine().paused()) return http_error(409, "weight_checker requires an awake, unpaused engine");
  if (action == "compare" && !body.value("baseline", json()).is_object()) {
    return http_error(400, "action='compare' requires a 'baseline' object");
  }
  if (action == "reset") return http_error(501, "wsbench serve does not overwrite its weights (action 'reset')");
  json checksums = json::object();
  const auto ranks = server.state.engine().storage_checksums();
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const auto& [name, hex] : ranks[r]) checksums[checksum_key(r, name)] = hex;
  }
  if (action == "checksum") return json_reply(200, json{{"checksums", checksums}});
  const json& baseline = body["baseline"];
  std::vector<std::string> mismatches;
  for (const auto& [key, hex] : checksums.items()) {
    if (!baseline.contains(key) || baseline[key] != hex) mismatches.push_back(key);
  }
  for (const auto& [key, hex] : baseline.items()) {
    if (!checksums.contains(key)) mismatches.push_back(key);
  }
  std::sort(mismatches.begin(), mismatches.end());
  return json_reply(200, json{{"match", mismatches.empty()}, {"mismatches", mismatches}});
}

// POST /v1/completions, one prompt, greedy (vllm-project/vllm@d5dba2d7b0ab:
// vllm/entrypoints/openai/completion/protocol.py `class CompletionRequest`, `class CompletionResponse`).
HttpReply completions(Server& server, const HttpRequest& request) {
  if (!request.body || !request.body->is_object()) {
    return validation_error("body", "model_attributes_type", "Input should be a valid dictionary or object",
                            request.body.value_or(json()));
  }
  const json& body = *request.body;
  const auto bad = [](const std::string& message, const std::string& param) {
    return error_reply(400, message, "BadRequestError", param);
  };
  GenerateRequest gen;
  const json prompt = body.value("prompt", json());
  if (prompt.is_string() && !prompt.get<std::string>().empty()) {
    gen.input_ids = tokenize_bytes(prompt.get<std::string>());
  } else if (prompt.is_array() && !prompt.empty() &&
             std::all_of(prompt.begin(), prompt.end(), [](const json& e) { return e.is_number_integer(); })) {
    gen.input_ids = prompt.get<std::vector<int32_t>>();
  } else if (prompt.is_array() && !prompt.empty()) {
    return bad("wsbench serve answers one prompt per request (a string or a list of token ids)", "prompt");
  } else {
    return validation_error("body", "value_error",
                            "Value error, Either prompt or prompt_embeds must be provided and non-empty.", body);
  }
  const json max_tokens = body.value("max_tokens", json(16));
  if (!max_tokens.is_number_integer() || max_tokens.get<int64_t>() < 1) {
    return bad(fmt::format("max_tokens must be at least 1, got {}", max_tokens.dump()), "max_tokens");
  }
  gen.max_new_tokens = max_tokens.get<int>();
  // vLLM samples at temperature 1.0 when none is given; the embedded engine only decodes greedily.
  const json temperature = body.value("temperature", json());
  if (!temperature.is_number() || temperature.get<double>() != 0.0) {
    return bad(fmt::format("wsbench serve decodes greedily only: temperature must be 0, got {}",
                           temperature.is_null() ? "none (vLLM's default 1.0)" : temperature.dump()),
               "temperature");
  }
  if (body.value("n", json(1)) != 1) return bad("wsbench serve answers one choice per request (n = 1)", "n");
  if (body.value("stream", json(false)) == true) return bad("wsbench serve does not stream completions", "stream");
  const json logprobs = body.value("logprobs", json());
  if (!logprobs.is_null() && (!logprobs.is_number_integer() || logprobs.get<int64_t>() < 0)) {
    return error_reply(400, "1 validation error:\n  Value error, `logprobs` must be a positive value.",
                       status_phrase(400), "logprobs");
  }
  gen.return_logprob = !logprobs.is_null();
  const bool token_ids = body.value("return_token_ids", json(false)) == true;
  const bool ids_as_tokens = body.value("return_tokens_as_token_ids", json(false)) == true;

  GenerateResult result;
  try {
    result = serve_generate(server.state, gen);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Format) return bad(e.what(), "prompt");
    return internal_error(e);
  }
  const GenerateResponse& r = result.response;
  json choice{{"index", 0}, {"text", r.text}, {"logprobs", nullptr}, {"finish_reason", r.finish_reason},
              {"stop_reason", nullptr}, {"token_ids", nullptr}, {"prompt_logprobs", nullptr},
              {"prompt_token_ids", nullptr}};
  if (gen.return_logprob) {
    json offsets = json::array(), lps = json::array(), tokens = json::array(), top = json::array();
    size_t offset = 0;
    for (size_t i = 0; i < r.output_ids.size(); ++i) {
      const std::string text = detokenize({r.output_ids[i]});
      const std::string token = ids_as_tokens ? fmt::format("token_id:{}", r.output_ids[i]) : text;
      offsets.push_back(offset);
      offset += text.size();
      lps.push_back(static_cast<double>(r.logprobs.at(i)));
      tokens.push_back(token);
      top.push_back(json{{token, static_cast<double>(r.logprobs.at(i))}});
    }
    choice["logprobs"] = json{{"text_offset", offsets}, {"token_logprobs", lps}, {"tokens", tokens},
                              {"top_logprobs", top}};
  }
  if (token_ids) {
    choice["token_ids"] = r.output_ids;
    choice["prompt_token_ids"] = gen.input_ids;
  }
  if (request.extras) {
    json versions = json::array();
    for (const WeightVersion& v : result.step_versions) versions.push_back(v.text);
    choice["wsbench_weight_version"] = result.version.text;
    choice["wsbench_step_versions"] = versions;
    json steps = json::array();
    for (double t : r.step_times) steps.push_back(monotonic_from_steady(t));  // host clock: the client's too
    choice["wsbench_step_times"] = steps;
    choice["wsbench_restarts"] = r.restarts;
  }
  uint64_t id = 0;
  {
    std::lock_guard lock(server.mu);
    id = ++server.completions;
  }
  const size_t prompt_tokens = gen.input_ids.size(), completion_tokens = r.output_ids.size();
  return json_reply(200, json{{"id", fmt::format("cmpl-wsbench-{}", id)},
                              {"object", "text_completion"},
                              {"created", static_cast<int64_t>(std::time(nullptr))},
                              {"model", body.value("model", json("wsbench"))},
                              {"choices", json::array({choice})},
                              {"service_tier", nullptr},
                              {"system_fingerprint", nullptr},
                              {"usage", {{"prompt_tokens", prompt_tokens},
                                         {"total_tokens", prompt_tokens + completion_tokens},
                                         {"completion_tokens", completion_tokens},
                                         {"prompt_tokens_details", nullptr}}},
                              {"kv_transfer_params", nullptr}});
}

// GET /health: an empty 200 while serving, 503 once the engine died
// (vllm-project/vllm@98b137c61dcf:vllm/entrypoints/serve/instrumentator/health.py:22-29).
HttpReply health(Server& server, const HttpRequest&) {
  return text_reply(server.state.engine().healthy() ? 200 : 503, "");
}

// GET /is_paused (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:141-155).
HttpReply is_paused(Server& server, const HttpRequest&) {
  return json_reply(200, json{{"is_paused", server.state.engine().paused()}});
}

}  // namespace

std::vector<Route> vllm_routes(ServeState& state) {
  auto server = std::make_shared<Server>(state);
  using Handler = HttpReply (*)(Server&, const HttpRequest&);
  const std::vector<std::tuple<const char*, const char*, Handler>> table{
      {"GET", "/health", health},
      {"POST", "/v1/completions", completions},
      {"POST", "/pause", pause},
      {"POST", "/resume", resume},
      {"GET", "/is_paused", is_paused},
      {"POST", "/collective_rpc", collective_rpc},
      {"POST", "/update_weight_version", update_weight_version},
      {"GET", "/weight_info", weight_info},
      {"POST", "/reset_prefix_cache", reset_prefix_cache},
      {"POST", "/init_weight_transfer_engine", init_weight_transfer_engine},
      {"POST", "/start_weight_update", start_weight_update},
      {"POST", "/update_weights", update_weights},
      {"POST", "/finish_weight_update", finish_weight_update},
      {"POST", "/weight_checker", weight_checker},
  };
  std::vector<Route> routes;
  for (const auto& [method, path, handler] : table) {
    routes.push_back(Route{method, path, [server, handler = handler](const HttpRequest& r) { return handler(*server, r); }});
  }
  return routes;
}

}  // namespace wsb
