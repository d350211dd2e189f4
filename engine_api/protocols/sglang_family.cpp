#include "engine_api/protocols/sglang_family.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/phase_log.hpp"

namespace wsb::sglang {
namespace {

using json = nlohmann::json;

[[noreturn]] void format_error(const std::string& endpoint, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", endpoint, what));
}

const json& array_field(const json& object, const std::string& key, const std::string& endpoint) {
  const json& j = wire::field(object, key, endpoint);
  if (!j.is_array()) format_error(endpoint, fmt::format("field '{}' must be a list, got {}", key, j.dump()));
  return j;
}

int32_t token_id(const json& j, const std::string& where, const std::string& endpoint) {
  if (!j.is_number_integer())
    format_error(endpoint, fmt::format("{} must be an integer token id, got {}", where, j.dump()));
  return j.get<int32_t>();
}

/// The optional wsbench extras of meta_info (engine_api/protocols/sglang_family_routes.hpp writes them).
void parse_extras(const json& meta, GenerateResult& result, const std::string& endpoint) {
  if (auto it = meta.find("wsbench_step_times"); it != meta.end()) {
    if (!it->is_array()) format_error(endpoint, "field 'meta_info.wsbench_step_times' must be a list");
    for (const json& t : *it) {
      if (!t.is_number()) format_error(endpoint, "meta_info.wsbench_step_times holds a non-number");
      result.response.step_times.push_back(steady_from_monotonic(t.get<double>()));
    }
  }
  if (auto it = meta.find("wsbench_restarts"); it != meta.end()) {
    if (!it->is_number_integer()) format_error(endpoint, "field 'meta_info.wsbench_restarts' must be an integer");
    result.response.restarts = it->get<int>();
  }
  if (auto it = meta.find("wsbench_step_versions"); it != meta.end()) {
    if (!it->is_array()) format_error(endpoint, "field 'meta_info.wsbench_step_versions' must be a list");
    for (const json& v : *it) {
      result.step_versions.push_back(WeightVersion::from_json(v, endpoint + ": meta_info.wsbench_step_versions"));
    }
    if (result.step_versions.size() < result.response.output_ids.size()) {
      format_error(endpoint, fmt::format("meta_info.wsbench_step_versions has {} entries for {} output tokens (one per "
                                         "step, prompt steps first)",
                                         result.step_versions.size(), result.response.output_ids.size()));
    }
  }
}

}  // namespace

std::string version_text(uint32_t version) { return std::to_string(version); }

HttpRequest generate_request(const GenerateRequest& request) {
  HttpRequest http{
      "POST",
      "/generate",
      {},
      json{{"input_ids", request.input_ids},
           {"sampling_params", {{"temperature", 0}, {"max_new_tokens", request.max_new_tokens}, {"ignore_eos", true}}},
           {"return_logprob", request.return_logprob},
           {"logprob_start_len", -1}}};
  http.extras = true;
  return http;
}

GenerateResult parse_generate(const json& reply) {
  const std::string endpoint = "POST /generate";
  GenerateResult result;
  result.response.text = wire::string_field(reply, "text", endpoint);
  for (const json& id : array_field(reply, "output_ids", endpoint)) {
    result.response.output_ids.push_back(token_id(id, "an entry of output_ids", endpoint));
  }
  const json& meta = wire::field(reply, "meta_info", endpoint);
  if (!meta.is_object()) format_error(endpoint, "field 'meta_info' must be an object");
  result.version = WeightVersion::from_json(wire::field(meta, "weight_version", endpoint),
                                            endpoint + ": field 'meta_info.weight_version'");
  const json& finish = wire::field(meta, "finish_reason", endpoint);
  if (!finish.is_object()) {
    format_error(endpoint,
                 fmt::format("field 'meta_info.finish_reason' must be an object {{type, ...}}, got {}", finish.dump()));
  }
  result.response.finish_reason = wire::string_field(finish, "type", endpoint) == "abort" ? "abort" : "length";
  if (auto it = meta.find("output_token_logprobs"); it != meta.end()) {
    if (!it->is_array()) format_error(endpoint, "field 'meta_info.output_token_logprobs' must be a list");
    if (it->size() != result.response.output_ids.size()) {
      format_error(endpoint, fmt::format("meta_info.output_token_logprobs has {} entries for {} output tokens",
                                         it->size(), result.response.output_ids.size()));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& entry = (*it)[i];
      if (!entry.is_array() || entry.size() < 2 || !entry[0].is_number()) {
        format_error(endpoint, fmt::format("meta_info.output_token_logprobs[{}] must be [logprob, token_id, text], "
                                           "got {}",
                                           i, entry.dump()));
      }
      if (token_id(entry[1], fmt::format("meta_info.output_token_logprobs[{}][1]", i), endpoint) !=
          result.response.output_ids[i]) {
        format_error(endpoint,
                     fmt::format("meta_info.output_token_logprobs[{}] names token {} but output_ids[{}] is {}", i,
                                 entry[1].dump(), i, result.response.output_ids[i]));
      }
      result.response.logprobs.push_back(static_cast<float>(entry[0].get<double>()));
    }
  }
  parse_extras(meta, result, endpoint);
  return result;
}

HttpRequest model_info_request() { return HttpRequest{"GET", "/model_info", {}, std::nullopt}; }

WeightVersion parse_model_info(const json& reply) {
  const std::string endpoint = "GET /model_info";
  return WeightVersion::from_json(wire::field(reply, "weight_version", endpoint),
                                  endpoint + ": field 'weight_version'");
}

HttpRequest checksum_request() { return HttpRequest{"POST", "/weights_checker", {}, json{{"action", "checksum"}}}; }

RankChecksums parse_checksums(const json& reply) {
  const std::string endpoint = "POST /weights_checker";
  wire::expect_success(reply, endpoint);
  RankChecksums out;
  out.basis = "per parameter, SGLang /weights_checker (64-bit hash per name)";
  const json& ranks = array_field(reply, "ranks", endpoint);
  out.ranks.resize(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const json& rank = ranks[i];
    size_t index = i;
    if (rank.is_object()) {
      if (auto it = rank.find("parallelism_info"); it != rank.end()) {
        // One object upstream; a list of one entry per role (target first) on the staging fork.
        const json* info = it->is_array() && !it->empty() ? &(*it)[0] : &*it;
        if (info->is_object()) {
          if (auto tp = info->find("tp_rank"); tp != info->end() && tp->is_number_unsigned()) index = tp->get<size_t>();
        }
      }
    }
    if (index >= ranks.size())
      format_error(endpoint, fmt::format("ranks[{}] has tp_rank {} of {} ranks", i, index, ranks.size()));
    const json& checksums = wire::field(rank, "checksums", endpoint);
    if (!checksums.is_object()) format_error(endpoint, fmt::format("ranks[{}].checksums must be an object", i));
    for (const auto& [name, hex] : checksums.items()) {
      if (!hex.is_string()) format_error(endpoint, fmt::format("ranks[{}].checksums['{}'] must be a string", i, name));
      out.ranks[index][name] = hex.get<std::string>();
    }
  }
  return out;
}

HttpRequest pause_request(PauseMode mode) {
  if (mode == PauseMode::Drain) {
    throw Error(ErrorKind::Format, "POST /pause_generation: drain has no pause call (an unpaused update drains)");
  }
  HttpRequest request{"POST", "/pause_generation", {}, json{{"mode", std::string(name_of(mode))}}};
  request.timeout_s = kControlTimeoutS;
  return request;
}

HttpRequest continue_request() {
  HttpRequest request{"POST", "/continue_generation", {}, json::object()};
  request.timeout_s = kControlTimeoutS;
  return request;
}

std::vector<CommitCall> paused_commit(PauseMode pause, std::vector<HttpRequest> commits) {
  std::vector<CommitCall> calls;
  if (pause != PauseMode::Drain) calls.push_back({CallRole::Pause, pause_request(pause)});
  for (auto& request : commits) calls.push_back({CallRole::Commit, std::move(request)});
  if (pause != PauseMode::Drain) calls.push_back({CallRole::Continue, continue_request()});
  return calls;
}

const std::vector<PauseMode>& family_pause_modes() {
  static const std::vector<PauseMode> modes{PauseMode::Drain, PauseMode::Retract, PauseMode::InPlace, PauseMode::Abort};
  return modes;
}

void FamilyProtocol::check_update_reply(const HttpRequest& request, const json& reply) const {
  const std::string endpoint = request.endpoint();
  if (request.path == "/pause_generation" || request.path == "/continue_generation") {
    const std::string status = wire::string_field(reply, "status", endpoint);
    if (status != "ok") {
      throw Error(ErrorKind::State, fmt::format("{}: the server answered status '{}'", endpoint, status));
    }
    return;
  }
  wire::expect_success(reply, endpoint);
}

}  // namespace wsb::sglang
