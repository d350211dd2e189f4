#include "engine_api/protocols/sglang_family_routes.hpp"

#include <openssl/evp.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <shared_mutex>

#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "models/forward/forward.hpp"

namespace wsb::sglang {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

/// One pydantic error, as FastAPI prints it inside RequestValidationError's message (U:hs:562-584).
[[noreturn]] void invalid(const std::string& type, const std::string& key, const std::string& msg) {
  const std::string loc = key.empty() ? "('body',)" : fmt::format("('body', '{}')", key);
  const std::string error = fmt::format("{{'type': '{}', 'loc': {}, 'msg': '{}'}}", type, loc, msg);
  throw InvalidRequest(fmt::format("1 validation error:\n  {}\n [{}]", error, error));
}

std::optional<int64_t> lax_int(const json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    size_t used = 0;
    try {
      const int64_t v = std::stoll(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::optional<bool> lax_bool(const json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v == 0 || v == 1) return v == 1;
  }
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* t : {"1", "on", "t", "true", "y", "yes"}) {
      if (s == t) return true;
    }
    for (const char* f : {"0", "off", "f", "false", "n", "no"}) {
      if (s == f) return false;
    }
  }
  return std::nullopt;
}

std::string sha256_hex(const std::string& data) {
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) {
    throw Error(ErrorKind::Io, "sha256: libcrypto failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

/// model_type and architectures of the boot checkpoint's config.json (null when it has none): what SGLang reads
/// from the Hugging Face config it loaded (U:hs:700-712).
std::pair<json, json> hf_identity(const fs::path& checkpoint) {
  std::ifstream in(checkpoint / "config.json");
  if (!in) return {nullptr, nullptr};
  const json config = json::parse(in, nullptr, false);
  if (!config.is_object()) return {nullptr, nullptr};
  return {config.value("model_type", json(nullptr)), config.value("architectures", json(nullptr))};
}

/// What /generate reads of a request (io:155-260), refusing what the embedded engine cannot answer as a real
/// server would (it decodes greedily, one prompt at a time, and computes logprobs of output tokens only).
struct GenerateCall {
  GenerateRequest request;
  std::string rid;
  int top_logprobs = 0;
  bool text_in_logprobs = false;
};

/// nullopt with `why` set when the engine cannot serve the request.
std::optional<GenerateCall> read_generate(const Body& body, std::string& why) {
  GenerateCall call;
  if (const json* ids = body.find("input_ids")) {
    if (!ids->is_array()) invalid("list_type", "input_ids", "Input should be a valid list");
    for (const json& id : *ids) {
      if (id.is_array()) {
        why = "wsbench serve answers one prompt per request (input_ids as a list of lists is a batch)";
        return std::nullopt;
      }
      const auto v = lax_int(id);
      if (!v || *v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
        invalid("int_type", "input_ids", "Input should be a valid integer");
      }
      call.request.input_ids.push_back(static_cast<int32_t>(*v));
    }
  } else if (const json* text = body.find("text")) {
    if (!text->is_string()) {
      why = "wsbench serve answers one prompt per request (text as a list is a batch)";
      return std::nullopt;
    }
    call.request.input_ids = tokenize_bytes(text->get<std::string>());
  } else {
    why = "Either text, input_ids or input_embeds should be provided.";
    return std::nullopt;
  }
  int64_t max_new_tokens = 128;  // U:python/sglang/srt/sampling/sampling_params.py:84
  if (const json* sampling = body.find("sampling_params")) {
    if (!sampling->is_object()) {
      why = "wsbench serve answers one prompt per request (sampling_params as a list is a batch)";
      return std::nullopt;
    }
    double temperature = 1.0;
    int64_t top_k = -1;
    if (auto t = sampling->find("temperature"); t != sampling->end() && !t->is_null()) {
      if (!t->is_number()) {
        why = fmt::format("sampling_params.temperature must be a number, got {}", t->dump());
        return std::nullopt;
      }
      temperature = t->get<double>();
    }
    if (auto k = sampling->find("top_k"); k != sampling->end() && !k->is_null()) top_k = lax_int(*k).value_or(-1);
    if (auto m = sampling->find("max_new_tokens"); m != sampling->end() && !m->is_null()) {
      const auto v = lax_int(*m);
      if (!v) {
        why = fmt::format("sampling_params.max_new_tokens must be an integer, got {}", m->dump());
        return std::nullopt;
      }
      max_new_tokens = *v;
    }
    // Greedy when temperature < 1e-6 or top_k == 1 (U:python/sglang/srt/sampling/sampling_params.py:168-171).
    if (!(temperature >= 0 && temperature < 1e-6) && top_k != 1) {
      why = fmt::format("wsbench serve decodes greedily only (temperature 0 or top_k 1), got temperature {}",
                        temperature);
      return std::nullopt;
    }
  } else {
    why = "wsbench serve decodes greedily only: give sampling_params.temperature 0 (SGLang's default is 1.0)";
    return std::nullopt;
  }
  if (max_new_tokens < 1 || max_new_tokens > 1'000'000) {
    why = fmt::format("wsbench serve needs 1 <= max_new_tokens <= 1000000, got {}", max_new_tokens);
    return std::nullopt;
  }
  call.request.max_new_tokens = static_cast<int>(max_new_tokens);
  call.request.return_logprob = body.optional_bool("return_logprob", false);
  const int64_t start = body.optional_int("logprob_start_len").value_or(-1);
  if (call.request.return_logprob && start != -1 && start < static_cast<int64_t>(call.request.input_ids.size())) {
    why = fmt::format("wsbench serve computes logprobs of output tokens only (logprob_start_len -1), got {}", start);
    return std::nullopt;
  }
  call.top_logprobs = static_cast<int>(body.optional_int("top_logprobs_num").value_or(0));
  if (call.top_logprobs > 1) {
    why = fmt::format("wsbench serve reports the chosen token only (top_logprobs_num <= 1), got {}", call.top_logprobs);
    return std::nullopt;
  }
  call.text_in_logprobs = body.optional_bool("return_text_in_logprobs", false);
  if (body.optional_bool("stream", false)) {
    why = "wsbench serve does not stream (stream: true)";
    return std::nullopt;
  }
  if (const json* rid = body.find("rid")) {
    if (!rid->is_string()) {
      why = "wsbench serve answers one prompt per request (rid as a list is a batch)";
      return std::nullopt;
    }
    call.rid = rid->get<std::string>();
  }
  return call;
}

json logprob_entry(float logprob, int32_t id, bool with_text) {
  return json::array({logprob, id, with_text ? json(detokenize({id})) : json(nullptr)});
}

/// finish_reason as the scheduler reports it: FINISH_LENGTH {type, length} (sb:193-202); an abort of a running
/// request FINISH_ABORT {type, message: "Aborted", status_code, err_type} (sb:205-218; sch:4147-4161), of a queued
/// one {type, message: "Abort in waiting queue"} (tm:2795-2799).
json finish_reason(const GenerateResponse& response) {
  if (response.finish_reason != "abort") {
    return {{"type", "length"}, {"length", response.output_ids.size()}};
  }
  if (response.step_times.empty()) return {{"type", "abort"}, {"message", "Abort in waiting queue"}};
  return {{"type", "abort"}, {"message", "Aborted"}, {"status_code", nullptr}, {"err_type", nullptr}};
}

}  // namespace

Body::Body(const HttpRequest& request) : body_(request.body.value_or(json::object())) {
  if (!body_.is_object()) invalid("dict_type", "", "Input should be a valid dictionary");
}

const json* Body::find(const std::string& key) const {
  auto it = body_.find(key);
  return it == body_.end() || it->is_null() ? nullptr : &*it;
}

std::string Body::required_string(const std::string& key) const {
  if (!body_.contains(key)) invalid("missing", key, "Field required");
  const json* j = find(key);
  if (!j || !j->is_string()) invalid("string_type", key, "Input should be a valid string");
  return j->get<std::string>();
}

std::optional<std::string> Body::optional_string(const std::string& key) const {
  const json* j = find(key);
  if (!j) return std::nullopt;
  if (!j->is_string()) invalid("string_type", key, "Input should be a valid string");
  return j->get<std::string>();
}

int64_t Body::required_int(const std::string& key) const {
  if (!body_.contains(key)) invalid("missing", key, "Field required");
  const json* j = find(key);
  if (!j) invalid("int_type", key, "Input should be a valid integer");
  const auto v = lax_int(*j);
  if (!v) invalid("int_parsing", key, "Input should be a valid integer, unable to parse string as an integer");
  return *v;
}

std::optional<int64_t> Body::optional_int(const std::string& key) const {
  const json* j = find(key);
  if (!j) return std::nullopt;
  const auto v = lax_int(*j);
  if (!v) invalid("int_parsing", key, "Input should be a valid integer, unable to parse string as an integer");
  return v;
}

bool Body::optional_bool(const std::string& key, bool fallback) const {
  auto it = body_.find(key);
  if (it == body_.end()) return fallback;
  const auto v = it->is_null() ? std::nullopt : lax_bool(*it);
  if (!v) invalid("bool_parsing", key, "Input should be a valid boolean, unable to interpret input");
  return *v;
}

std::string Body::literal(const std::string& key, const std::vector<std::string>& allowed,
                          const std::string& fallback) const {
  auto it = body_.find(key);
  if (it == body_.end()) return fallback;
  if (it->is_string()) {
    for (const auto& a : allowed) {
      if (it->get<std::string>() == a) return a;
    }
  }
  std::string expected;
  for (size_t i = 0; i < allowed.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + ("'" + allowed[i] + "'");
  }
  invalid("literal_error", key, "Input should be " + expected);
}

HttpReply validation_reply(const InvalidRequest& error) {
  return json_reply(
      400,
      json{{"object", "error"}, {"message", error.what()}, {"type", "Bad Request"}, {"param", nullptr}, {"code", 400}});
}

HttpReply error_reply(int status, const std::string& message) {
  return json_reply(status, json{{"error", {{"message", message}}}});
}

HttpReply update_reply(bool success, const std::string& message, json extra) {
  json body{{"success", success}, {"message", message}};
  for (auto& [k, v] : extra.items()) body[k] = std::move(v);
  return json_reply(success ? 200 : 400, body);
}

std::string traceback_message(const std::exception& error) {
  const auto* e = dynamic_cast<const Error*>(&error);
  const char* type = e && e->kind() == ErrorKind::Missing ? "FileNotFoundError" : "RuntimeError";
  return fmt::format("Traceback (most recent call last):\n  (the embedded engine of wsbench serve)\n{}: {}\n", type,
                     error.what());
}

bool same_path(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  if (ea || eb) return a.lexically_normal() == b.lexically_normal();
  return ca.lexically_normal() == cb.lexically_normal();
}

std::function<HttpReply(const HttpRequest&)> validated(std::function<HttpReply(const HttpRequest&)> handler) {
  return [handler = std::move(handler)](const HttpRequest& request) {
    try {
      return handler(request);
    } catch (const InvalidRequest& e) {
      return validation_reply(e);
    }
  };
}

std::vector<Route> owned_by(std::shared_ptr<void> owner, std::vector<Route> routes) {
  for (Route& route : routes) {
    route.handler = [owner, handler = std::move(route.handler)](const HttpRequest& r) { return handler(r); };
  }
  return routes;
}

FamilyServer::FamilyServer(ServeState& state)
    : state_(state), boot_version_(state.engine().weight_version()), model_path_(state.boot_checkpoint()) {}

std::vector<Route> FamilyServer::common_routes(InfoHook server_info_hook) {
  std::vector<Route> routes;
  routes.push_back({"POST", "/generate", validated([this](const HttpRequest& r) { return generate(r); })});
  routes.push_back({"GET", "/model_info", [this](const HttpRequest&) { return model_info(); }});
  routes.push_back({"GET", "/server_info",
                    [this, hook = std::move(server_info_hook)](const HttpRequest&) { return server_info(hook); }});
  for (const char* method : {"GET", "POST"}) {
    routes.push_back(
        {method, "/weights_checker", validated([this](const HttpRequest& r) { return weights_checker(r); })});
    routes.push_back({method, "/flush_cache", validated([this](const HttpRequest& r) { return flush_cache(r); })});
  }
  routes.push_back({"POST", "/pause_generation", validated([this](const HttpRequest& r) { return pause(r); })});
  routes.push_back({"POST", "/continue_generation", validated([this](const HttpRequest& r) { return resume(r); })});
  return routes;
}

HttpReply FamilyServer::generate(const HttpRequest& http) {
  const Body body(http);
  std::string why;
  std::optional<GenerateCall> call = read_generate(body, why);
  if (!call) return error_reply(400, why);
  if (call->rid.empty()) {
    std::lock_guard lock(mu_);
    call->rid = fmt::format("{:032x}", ++next_rid_);
  }
  // A paused server holds new requests before they take the reader lock (tm:654-657); a waiting writer holds them
  // too, so an unpaused update never starves behind a stream of requests.
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !paused_ && writers_waiting_ == 0; });
  }
  std::shared_lock reader(state_.model_update_lock());
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  GenerateResult result;
  try {
    result = serve_generate(state_, call->request);
  } catch (const Error& e) {
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    cv_.notify_all();
    return error_reply(e.kind() == ErrorKind::Fatal ? 500 : 400, e.what());
  }
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  cv_.notify_all();
  reader.unlock();

  const GenerateResponse& r = result.response;
  json meta{{"id", call->rid},
            {"finish_reason", finish_reason(r)},
            {"prompt_tokens", call->request.input_ids.size()},
            {"weight_version", result.version.text},
            {"num_retractions", r.restarts},
            {"reasoning_tokens", 0},
            {"completion_tokens", r.output_ids.size()},
            {"cached_tokens", 0}};
  if (call->request.return_logprob) {
    // logprob_start_len -1 with return_logprob starts at the prompt's end: no input logprobs (sch:2308-2312).
    json out = json::array(), top = json::array();
    for (size_t i = 0; i < r.output_ids.size() && i < r.logprobs.size(); ++i) {
      out.push_back(logprob_entry(r.logprobs[i], r.output_ids[i], call->text_in_logprobs));
      top.push_back(json::array({logprob_entry(r.logprobs[i], r.output_ids[i], call->text_in_logprobs)}));
    }
    meta["input_token_logprobs"] = json::array();
    meta["output_token_logprobs"] = out;
    meta["output_token_logprobs_length"] = out.size();
    if (call->top_logprobs > 0) {
      meta["input_top_logprobs"] = json::array();
      meta["output_top_logprobs"] = top;
    }
  }
  if (http.extras) {
    json versions = json::array();
    for (const auto& v : result.step_versions) versions.push_back(v.text);
    json steps = json::array();
    for (double t : r.step_times) steps.push_back(monotonic_from_steady(t));  // host clock: the client's too
    meta["wsbench_step_times"] = steps;
    meta["wsbench_restarts"] = r.restarts;
    meta["wsbench_step_versions"] = versions;
  }
  return json_reply(200, json{{"text", r.text}, {"output_ids", r.output_ids}, {"meta_info", meta}});
}

HttpReply FamilyServer::model_info() {
  const auto [model_type, architectures] = hf_identity(state_.boot_checkpoint());
  const std::string path = model_path().string();
  return json_reply(200, json{{"model_path", path},
                              {"tokenizer_path", state_.boot_checkpoint().string()},
                              {"is_generation", true},
                              {"preferred_sampling_params", nullptr},
                              {"weight_version", state_.served_version().text},
                              {"has_image_understanding", false},
                              {"has_audio_understanding", false},
                              {"model_type", model_type},
                              {"architectures", architectures}});
}

HttpReply FamilyServer::server_info(const InfoHook& hook) {
  // The real answer holds every server argument (U:hs:733-755); these are the ones a client reads.
  json info{{"model_path", model_path().string()},
            {"tp_size", engine().layouts().size()},
            {"dp_size", 1},
            {"weight_version", state_.served_version().text},
            {"internal_states", json::array()},
            {"version", "wsbench serve"}};
  if (hook) hook(info);
  return json_reply(200, info);
}

HttpReply FamilyServer::weights_checker(const HttpRequest& request) {
  const Body body(request);
  const std::string action = body.optional_string("action").value_or("checksum");
  if (action != "checksum") {
    // snapshot, reset_tensors and compare exist upstream (U:python/sglang/srt/utils/weight_checker.py:71-84);
    // any other action fails as "Unsupported action=..." does.
    return update_reply(false, action == "snapshot" || action == "reset_tensors" || action == "compare"
                                   ? fmt::format("wsbench serve implements action 'checksum' only, not '{}'", action)
                                   : fmt::format("Unsupported action='{}'", action));
  }
  // Per rank, per runtime storage: the high 64 bits of the engine's xxh3-128 of the stored bytes, as 16 hex. Real
  // SGLang hashes each dequantized parameter by name (tensor_hash, weight_checker.py:136-139), so the names and
  // values differ from a real server's; the shape, per_gpu_checksum (sha256 over the sorted name, hash pairs,
  // :141-145) and per_engine_checksum (sha256 over the per-GPU values in rank order, tc:784-791) follow it.
  const auto checksums = engine().storage_checksums();
  const int tp = static_cast<int>(checksums.size());
  json ranks = json::array();
  std::string engine_digest;
  for (int r = 0; r < tp; ++r) {
    json names = json::object();
    std::string pairs;
    for (const auto& [name, hex] : checksums[static_cast<size_t>(r)]) {
      const std::string h64 = hex.substr(0, 16);
      names[name] = h64;
      pairs += name + h64;
    }
    const std::string per_gpu = sha256_hex(pairs);
    engine_digest += per_gpu;
    json parallelism{{"tp_rank", r}, {"tp_size", tp}, {"dp_rank", 0}, {"dp_size", 1},
                     {"pp_rank", 0}, {"pp_size", 1},  {"rank", r},    {"size", tp}};
    if (parallelism_per_role_) {
      parallelism["role"] = "target";
      parallelism = json::array({parallelism});
    }
    ranks.push_back({{"checksums", names}, {"per_gpu_checksum", per_gpu}, {"parallelism_info", parallelism}});
  }
  return update_reply(true, "Success.", json{{"ranks", ranks}, {"per_engine_checksum", sha256_hex(engine_digest)}});
}

HttpReply FamilyServer::flush_cache(const HttpRequest& request) {
  // Query `timeout` (seconds, >= 0): 0 flushes only an idle server, > 0 waits for idle that long (U:hs:895-911;
  // python/sglang/srt/managers/scheduler_components/flush_wrapper.py:24-64). The engine keeps no cache between
  // requests, so the flush itself changes nothing.
  double timeout = 0;
  if (auto t = request.query_value("timeout")) {
    try {
      size_t used = 0;
      timeout = std::stod(*t, &used);
      if (used != t->size() || !(timeout >= 0)) throw std::invalid_argument("timeout");
    } catch (const std::exception&) {
      throw InvalidRequest(fmt::format(
          "1 validation error:\n  {{'type': 'greater_than_equal', 'loc': ('query', 'timeout'), 'msg': 'Input should "
          "be greater than or equal to 0'}}\n [{{'type': 'greater_than_equal', 'loc': ('query', 'timeout'), 'msg': "
          "'Input should be greater than or equal to 0'}}] (got '{}')",
          *t));
    }
  }
  std::unique_lock lock(mu_);
  const bool idle = cv_.wait_for(lock, std::chrono::duration<double>(timeout), [&] { return in_flight_ == 0; });
  if (idle) {
    return text_reply(200,
                      "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                      "waiting requests, the operation will not be performed.)\n");
  }
  return text_reply(400, timeout > 0 ? "Timed out waiting for idle state." : "Flush cache failed.\n");
}

HttpReply FamilyServer::pause(const HttpRequest& request) {
  const Body body(request);
  // Default "abort" (io:1509).
  const std::string name = body.literal("mode", {"abort", "retract", "in_place"}, "abort");
  const PauseMode mode = *parse_pause_mode(name);
  std::lock_guard control(control_);
  {
    std::lock_guard lock(mu_);
    if (paused_) {
      // SGLang sets is_pause again and answers ok; the first pause's mode stays in effect here.
      return json_reply(200, json{{"message", "Generation paused successfully."}, {"status", "ok"}});
    }
    paused_ = true;  // before the engine's pause, as is_pause is set before the abort (tm:1729-1742)
    pause_mode_ = mode;
  }
  try {
    // abort: SGLang aborts every request and polls each second until no request holds the reader lock
    // (tm:1733-1742); the engine ends them at once.
    engine().pause(mode);
  } catch (...) {
    {
      std::lock_guard lock(mu_);
      paused_ = false;
      pause_mode_.reset();
    }
    cv_.notify_all();
    throw;
  }
  state_.set_pause_mode(mode);
  return json_reply(200, json{{"message", "Generation paused successfully."}, {"status", "ok"}});
}

HttpReply FamilyServer::resume(const HttpRequest& request) {
  const Body body(request);
  (void)body.optional_bool("torch_empty_cache", true);
  std::lock_guard control(control_);
  {
    std::lock_guard lock(mu_);
    if (!paused_) return json_reply(200, json{{"message", "Generation continued successfully."}, {"status", "ok"}});
  }
  const double held = engine().paused() ? engine().resume() : 0.0;
  std::optional<CommitReport> commit;
  {
    std::lock_guard lock(mu_);
    paused_ = false;
    pause_mode_.reset();
    commit.swap(commit_in_pause_);
  }
  cv_.notify_all();
  state_.set_pause_mode(std::nullopt);
  if (commit) {
    // The commit ran inside this pause: the gate was closed from the pause to now.
    commit->pause_seconds = held;
    state_.record_commit(*commit);
  }
  return json_reply(200, json{{"message", "Generation continued successfully."}, {"status", "ok"}});
}

void FamilyServer::run_locked(bool abort_all_requests, const std::function<void(PauseMode)>& update) {
  {
    std::lock_guard control(control_);
    bool paused;
    {
      std::lock_guard lock(mu_);
      paused = paused_;
    }
    if (paused || abort_all_requests) {
      // Paused: no lock (tm:1766-1772). abort_all_requests ends the requests in flight instead of draining them.
      update(PauseMode::Abort);
      return;
    }
  }
  {
    std::lock_guard lock(mu_);
    ++writers_waiting_;
  }
  std::unique_lock writer(state_.model_update_lock(), std::defer_lock);
  try {
    writer.lock();
  } catch (...) {
    std::lock_guard lock(mu_);
    --writers_waiting_;
    throw;
  }
  {
    std::lock_guard lock(mu_);
    --writers_waiting_;
  }
  // The writer holds back new requests through the lock itself from here on.
  cv_.notify_all();
  std::lock_guard control(control_);
  update(PauseMode::Drain);
}

CommitReport FamilyServer::run_update(bool abort_all_requests, const std::function<CommitReport(PauseMode)>& commit) {
  CommitReport report;
  run_locked(abort_all_requests, [&](PauseMode mode) {
    report = commit(mode);
    record_commit(report);
  });
  return report;
}

void FamilyServer::record_commit(const CommitReport& report) {
  state_.record_commit(report);
  std::lock_guard lock(mu_);
  if (paused_) commit_in_pause_ = report;
}

bool FamilyServer::flush_would_fail() const {
  std::lock_guard lock(mu_);
  return paused_ && pause_mode_ == PauseMode::InPlace && in_flight_ > 0;
}

std::optional<PauseMode> FamilyServer::pause_mode() const {
  std::lock_guard lock(mu_);
  return paused_ ? pause_mode_ : std::nullopt;
}

fs::path FamilyServer::model_path() const {
  std::lock_guard lock(mu_);
  return model_path_;
}

void FamilyServer::set_model_path(const fs::path& path) {
  std::lock_guard lock(mu_);
  model_path_ = path;
}

fs::path FamilyServer::updates_dir() const { return state_.engine().options().store / "updates"; }

std::string FamilyServer::engine_mode() const { return std::string(state_.engine().mode().name()); }

void FamilyServer::set_served(uint32_t engine_version, const std::optional<std::string>& text) {
  state_.set_served(engine_version, text ? WeightVersion::parse(*text) : state_.served_version());
}

}  // namespace wsb::sglang
