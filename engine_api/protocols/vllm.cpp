// The vLLM protocol: an OpenAI-compatible vLLM server started with VLLM_SERVER_DEV_MODE=1, updated from a checkpoint
// on disk. vLLM prepares nothing itself: the harness materializes the target as a FULL checkpoint, and the commit is
// the disk reload a vLLM RL client runs:
//
//   POST /pause?mode=wait|keep|abort                       query parameters, no body
//   POST /collective_rpc {method: "reload_weights", kwargs: {weights_path: DIR}}
//   POST /update_weight_version {new_version: str(target)}
//   POST /reset_prefix_cache                               keep only (the pause cleared the caches otherwise)
//   POST /resume                                           always, also after a failed commit call
//
// Sources (short hashes as in vllm_wire.hpp; all vllm-project/vllm):
// - /pause, /resume (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:31-94): `mode` and `clear_cache` are
//   query parameters; the reply is {"status": "paused"} / {"status": "resumed"}. `clear_cache` (default true)
//   clears the KV and prefix caches when the pause drains or aborts and is ignored under keep (:48-49), so only a
//   keep commit resets the prefix cache after the reload (09cb327:vllm/entrypoints/serve/cache/api_router.py:22-46,
//   an empty 200 that does not say whether the reset worked).
// - The reload: the worker's `reload_weights` with a `weights_path` reloads every weight from that checkpoint into
//   the live parameters (vllm-project/vllm@115b6d47ad28:docs/training/layerwise.md, "Mid Level reload_weights
//   API"), reached over HTTP through POST /collective_rpc {method, args, kwargs, timeout}
//   (09cb327:vllm/entrypoints/serve/rpc/api_router.py:25-57: {"results": [one per worker]}; kwargs are passed as
//   strings). The weight-transfer session (/start_weight_update, /update_weights, /finish_weight_update) carries no
//   checkpoint path with the backends vLLM registers (nccl, ipc, sparse_nccl:
//   vllm-project/vllm@047c993cc49c:vllm/distributed/weight_transfer/factory.py, the `register_engine` calls at its
//   end); a shared-disk backend taking update_info {path} exists only as a draft (vllm-project/vllm@3b98defb1248:
//   vllm/distributed/weight_transfer/disk_engine.py), so the reload does not use it.
// - A reload leaves the reported version alone; POST /update_weight_version {new_version} sets it and answers
//   {"success": true, "new_version"}; GET /weight_info answers {"weight_version"}
//   (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:215-227).
// - Checksums: POST /weight_checker {"action": "checksum"} -> {"checksums": {key: sha256 hex}}, one key per
//   parameter shard (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py `def weight_checker`; key form 0888bfb).
//   It answers 409 while paused (same function), so it is asked after /resume only. Servers older than the weight
//   checker answer 404.
// - Generation: POST /v1/completions with the prompt as token ids, temperature 0 (absent means 1.0: sampled),
//   `return_token_ids` for the output ids and `logprobs` for per-token logprobs
//   (vllm-project/vllm@d5dba2d7b0ab:vllm/entrypoints/openai/completion/protocol.py `class CompletionRequest`,
//   `class CompletionLogProbs`, `class CompletionResponseChoice`: choices[0].token_ids and
//   choices[0].logprobs.token_logprobs, one per output token). vLLM reports no weight version per response; wsbench
//   serve's extras add choices[0].wsbench_{weight_version, step_versions, step_times (CLOCK_MONOTONIC
//   seconds), restarts}.
#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/vllm_wire.hpp"

namespace wsb {

namespace vllm {

std::optional<std::string_view> pause_query_value(PauseMode mode) {
  switch (mode) {
    case PauseMode::Abort: return "abort";
    case PauseMode::Drain: return "wait";
    case PauseMode::InPlace: return "keep";
    case PauseMode::Retract: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<PauseMode> pause_mode_of(std::string_view value) {
  if (value == "abort") return PauseMode::Abort;
  if (value == "wait") return PauseMode::Drain;
  if (value == "keep") return PauseMode::InPlace;
  return std::nullopt;
}

std::optional<ChecksumKey> split_checksum_key(std::string_view key) {
  // The rank fields are the leading `<letters><digits>:` segments; the tensor name is everything after them.
  std::optional<int> tp;
  std::string prefix;
  size_t pos = 0;
  while (true) {
    const size_t colon = key.find(':', pos);
    if (colon == std::string_view::npos) break;
    const std::string_view field = key.substr(pos, colon - pos);
    size_t letters = 0;
    while (letters < field.size() && std::islower(static_cast<unsigned char>(field[letters]))) ++letters;
    const std::string_view digits = field.substr(letters);
    const bool rank_field = letters > 0 && !digits.empty() &&
                            digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (!rank_field) break;
    int value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (field.substr(0, letters) == "tp") {
      tp = value;
    } else if (value != 0) {
      prefix.append(field).push_back(':');
    }
    pos = colon + 1;
  }
  if (!tp) return std::nullopt;
  return ChecksumKey{*tp, prefix + std::string(key.substr(pos))};
}

}  // namespace vllm

namespace {

using json = nlohmann::json;

constexpr std::string_view kCompletions = "/v1/completions";

/// An integer array field (token ids), naming the endpoint and the field when it is not one.
std::vector<int32_t> int_array(const json& object, const std::string& key, const std::string& endpoint) {
  const json& j = wire::field(object, key, endpoint);
  if (!j.is_array()) {
    throw Error(ErrorKind::Format, fmt::format("{}: field '{}' must be an array of token ids, got {}", endpoint, key,
                                               j.dump().substr(0, 200)));
  }
  std::vector<int32_t> out;
  out.reserve(j.size());
  for (const json& e : j) {
    if (!e.is_number_integer()) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: field '{}' must hold integers, got {}", endpoint, key, e.dump().substr(0, 200)));
    }
    out.push_back(e.get<int32_t>());
  }
  return out;
}

class VllmProtocol final : public Protocol {
 public:
  std::string_view name() const override { return "vllm"; }
  std::vector<SyncModeKind> modes() const override { return {SyncModeKind::Disk}; }
  std::vector<PauseMode> pause_modes() const override {
    return {PauseMode::Drain, PauseMode::InPlace, PauseMode::Abort};
  }
  /// vLLM's own /pause default is abort; a cell that names no pause mode gets wait, under which every request in
  /// flight finishes at one version (aborted probes carry no complete fingerprint).
  PauseMode default_pause_mode() const override { return PauseMode::Drain; }
  bool server_prepares(SyncModeKind) const override { return false; }

  HttpRequest generate(const GenerateRequest& request) const override {
    json body{{"prompt", request.input_ids},
              {"max_tokens", request.max_new_tokens},
              {"temperature", 0},
              {"ignore_eos", true},  // a real model's EOS would end the probe before max_tokens
              {"return_token_ids", true}};
    // logprobs=N returns the sampled token's logprob beside the top N; under greedy decoding the top 1 is the
    // sampled token, so 1 asks for nothing more than the fingerprint needs.
    if (request.return_logprob) body["logprobs"] = 1;
    HttpRequest http{"POST", std::string(kCompletions), {}, std::move(body)};
    http.extras = true;
    return http;
  }

  GenerateResult parse_generate(const json& reply) const override {
    const std::string endpoint = fmt::format("POST {}", kCompletions);
    const json& choices = wire::field(reply, "choices", endpoint);
    if (!choices.is_array() || choices.empty()) {
      throw Error(ErrorKind::Format, fmt::format("{}: field 'choices' must be a non-empty array, got {}", endpoint,
                                                 choices.dump().substr(0, 200)));
    }
    const json& choice = choices[0];
    GenerateResult result;
    GenerateResponse& r = result.response;
    r.output_ids = int_array(choice, "token_ids", endpoint + " choices[0]");
    r.text = wire::string_field(choice, "text", endpoint + " choices[0]");
    const json& finish = wire::field(choice, "finish_reason", endpoint + " choices[0]");
    if (!finish.is_null()) {
      if (!finish.is_string()) {
        throw Error(ErrorKind::Format, fmt::format("{} choices[0]: field 'finish_reason' must be a string, got {}",
                                                   endpoint, finish.dump()));
      }
      r.finish_reason = finish.get<std::string>();
    }
    if (auto it = choice.find("logprobs"); it != choice.end() && !it->is_null()) {
      const std::string where = endpoint + " choices[0].logprobs";
      const json& lps = wire::field(*it, "token_logprobs", where);
      if (!lps.is_array() || lps.size() != r.output_ids.size()) {
        throw Error(ErrorKind::Format, fmt::format("{}: field 'token_logprobs' must hold one number per token id ({}), "
                                                   "got {}", where, r.output_ids.size(), lps.dump().substr(0, 200)));
      }
      for (const json& lp : lps) {
        if (!lp.is_number()) {
          throw Error(ErrorKind::Format,
                      fmt::format("{}: field 'token_logprobs' must hold numbers, got {}", where, lp.dump()));
        }
        r.logprobs.push_back(static_cast<float>(lp.get<double>()));
      }
    }
    // wsbench serve's extras; a real vLLM sends none of them.
    const std::string extras = endpoint + " choices[0]";
    if (auto it = choice.find("wsbench_weight_version"); it != choice.end()) {
      result.version = WeightVersion::from_json(*it, extras + ".wsbench_weight_version");
    }
    if (auto it = choice.find("wsbench_step_versions"); it != choice.end()) {
      if (!it->is_array() || it->size() < r.output_ids.size()) {
        throw Error(ErrorKind::Format, fmt::format("{}: field 'wsbench_step_versions' must hold one version per "
                                                   "step, prompt steps first (at least {}), got {}", extras,
                                                   r.output_ids.size(), it->dump().substr(0, 200)));
      }
      for (const json& v : *it) result.step_versions.push_back(WeightVersion::from_json(v, extras));
    }
    if (auto it = choice.find("wsbench_step_times"); it != choice.end()) {
      if (!it->is_array()) {
        throw Error(ErrorKind::Format, fmt::format("{}: field 'wsbench_step_times' must be an array", extras));
      }
      for (const json& t : *it) {
        if (!t.is_number()) {
          throw Error(ErrorKind::Format,
                      fmt::format("{}: field 'wsbench_step_times' must hold numbers, got {}", extras, t.dump()));
        }
        r.step_times.push_back(steady_from_monotonic(t.get<double>()));
      }
    }
    if (auto it = choice.find("wsbench_restarts"); it != choice.end()) {
      if (!it->is_number_integer()) {
        throw Error(ErrorKind::Format,
                    fmt::format("{}: field 'wsbench_restarts' must be an integer, got {}", extras, it->dump()));
      }
      r.restarts = it->get<int>();
    }
    return result;
  }

  HttpRequest weight_version() const override { return HttpRequest{"GET", "/weight_info", {}, std::nullopt}; }

  /// {"weight_version": str | null}. null (no version set since boot) reads as "default", the name wsbench gives a
  /// server's boot version.
  WeightVersion parse_weight_version(const json& reply) const override {
    const json& j = wire::field(reply, "weight_version", "GET /weight_info");
    if (j.is_null()) return WeightVersion::parse("default");
    return WeightVersion::from_json(j, "GET /weight_info: field 'weight_version'");
  }

  std::optional<HttpRequest> prepare(const UpdateSpec&) const override { return std::nullopt; }

  std::vector<CommitCall> commit(const UpdateSpec& spec) const override {
    if (spec.mode != SyncModeKind::Disk) {
      throw Error(ErrorKind::Format, fmt::format("protocol 'vllm' has no {} mode (it drives: disk)", name_of(spec.mode)));
    }
    const auto mode = vllm::pause_query_value(spec.pause);
    if (!mode) {
      throw Error(ErrorKind::Format, fmt::format("protocol 'vllm' has no pause mode {} (it has: drain, in_place, "
                                                 "abort)", name_of(spec.pause)));
    }
    if (spec.checkpoint_dir.empty()) {
      throw Error(ErrorKind::Format, "protocol 'vllm': the commit needs the materialized target checkpoint "
                                     "(UpdateSpec::checkpoint_dir)");
    }
    std::vector<CommitCall> calls;
    calls.push_back({CallRole::Pause, HttpRequest{"POST", "/pause", {{"mode", std::string(*mode)}}, std::nullopt}});
    // Every worker reads the same path, so it must be absolute (the server's working directory is not ours).
    const json reload{{"method", "reload_weights"},
                      {"kwargs", {{"weights_path", std::filesystem::absolute(spec.checkpoint_dir).string()}}}};
    calls.push_back({CallRole::Commit, HttpRequest{"POST", "/collective_rpc", {}, reload}});
    calls.push_back({CallRole::Commit, HttpRequest{"POST", "/update_weight_version", {},
                                                   json{{"new_version", std::to_string(spec.target)}}}});
    if (spec.pause == PauseMode::InPlace) {
      calls.push_back({CallRole::Commit, HttpRequest{"POST", "/reset_prefix_cache", {}, std::nullopt}});
    }
    calls.push_back({CallRole::Continue, HttpRequest{"POST", "/resume", {}, std::nullopt}});
    return calls;
  }

  void check_update_reply(const HttpRequest& request, const json& reply) const override {
    const std::string endpoint = request.endpoint();
    if (request.path == "/pause" || request.path == "/resume") {
      const std::string want = request.path == "/pause" ? "paused" : "resumed";
      const std::string status = wire::string_field(reply, "status", endpoint);
      if (status != want) {
        throw Error(ErrorKind::State, fmt::format("{}: the server answered status '{}' (expected '{}')", endpoint,
                                                  status, want));
      }
    } else if (request.path == "/collective_rpc") {
      const json& results = wire::field(reply, "results", endpoint);
      if (!results.is_array()) {
        throw Error(ErrorKind::Format, fmt::format("{}: field 'results' must be an array, got {}", endpoint,
                                                   results.dump().substr(0, 200)));
      }
    } else if (request.path == "/update_weight_version") {
      wire::expect_success(reply, endpoint);
      const std::string sent = request.body ? request.body->value("new_version", std::string()) : std::string();
      const std::string echoed = wire::string_field(reply, "new_version", endpoint);
      if (echoed != sent) {
        throw Error(ErrorKind::State, fmt::format("{}: the server set version '{}' (sent '{}')", endpoint, echoed,
                                                  sent));
      }
    }
    // /reset_prefix_cache answers an empty body (plain_text).
  }

  std::optional<HttpRequest> checksums() const override {
    return HttpRequest{"POST", "/weight_checker", {}, json{{"action", "checksum"}}};
  }

  RankChecksums parse_checksums(const json& reply) const override {
    const std::string endpoint = "POST /weight_checker";
    const json& checksums = wire::field(reply, "checksums", endpoint);
    if (!checksums.is_object()) {
      throw Error(ErrorKind::Format, fmt::format("{}: field 'checksums' must be an object, got {}", endpoint,
                                                 checksums.dump().substr(0, 200)));
    }
    RankChecksums out;
    out.basis = "per parameter shard, vLLM POST /weight_checker (SHA-256 of its bytes)";
    for (const auto& [key, value] : checksums.items()) {
      auto split = vllm::split_checksum_key(key);
      // Keys of the weight checker as first merged carry the parameter name alone (0100a21 `def weight_checker`,
      // the recorded answer); later ones prefix the rank fields (0888bfb). A bare name is rank 0's.
      if (!split && key.find(':') == std::string::npos) split = vllm::ChecksumKey{0, key};
      if (!split || split->tp < 0) {
        throw Error(ErrorKind::Format, fmt::format("{}: checksum key '{}' names no TP rank (expected "
                                                   "dp{{d}}:pp{{p}}:pcp{{c}}:tp{{t}}:...:NAME)", endpoint, key));
      }
      if (!value.is_string()) {
        throw Error(ErrorKind::Format,
                    fmt::format("{}: checksum of '{}' must be a string, got {}", endpoint, key, value.dump()));
      }
      if (out.ranks.size() <= static_cast<size_t>(split->tp)) out.ranks.resize(static_cast<size_t>(split->tp) + 1);
      out.ranks[static_cast<size_t>(split->tp)][split->name] = value.get<std::string>();
    }
    return out;
  }

  /// /reset_prefix_cache and /health answer an empty 200 (09cb327:vllm/entrypoints/serve/cache/api_router.py:46;
  /// vllm-project/vllm@98b137c61dcf:vllm/entrypoints/serve/instrumentator/health.py:22-29).
  bool plain_text(const HttpRequest& request) const override {
    return request.path == "/reset_prefix_cache" || request.path == "/health";
  }
};

}  // namespace

std::unique_ptr<Protocol> make_vllm_protocol() { return std::make_unique<VllmProtocol>(); }

}  // namespace wsb
