#pragma once
// A weight-update protocol: how wsbench's operations (generate, weight version, prepare, commit with its pause,
// checksums) map onto one real engine server's HTTP API. Each protocol is a small table of request builders and
// response parsers (one file each: sglang.cpp, stitch_v0515.cpp, stitch_v0516.cpp, stitch_staging.cpp, vllm.cpp)
// behind HttpEngineClient; `wsbench serve --protocol P` answers the same API (serve_routes.hpp). Facts about each
// API cite the real sources (repo@commit:path:line); tests/fixtures/protocols/ holds recorded request and response
// examples taken from them.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/pause_mode.hpp"
#include "core/sync_options.hpp"
#include "core/weight_version.hpp"
#include "engine/generation.hpp"

namespace wsb {

/// One HTTP request as a protocol builds it (client side) or as a route receives it (server side).
struct HttpRequest {
  std::string method = "GET";  ///< "GET" | "POST"
  std::string path;            ///< "/update_weights_from_disk"
  std::vector<std::pair<std::string, std::string>> query;  ///< query parameters in order (vLLM's /pause?mode=keep)
  std::optional<nlohmann::json> body;                      ///< JSON body; nullopt: none sent
  double timeout_s = 0;                                    ///< read timeout; 0: the client's default
  /// Header "X-Wsbench-Extras: 1": asks `wsbench serve` for its extras (step times, step versions); real servers
  /// ignore unknown headers.
  bool extras = false;
  /// "POST /update_weights_from_disk" (what every error message names).
  std::string endpoint() const { return method + " " + path; }
  /// The query value of `key`, or nullopt.
  std::optional<std::string> query_value(std::string_view key) const;
};

/// One HTTP answer as a route gives it or the client receives it.
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

/// What the harness asks of one update, in the terms every protocol maps from.
struct UpdateSpec {
  uint32_t served = 0;  ///< version served now
  uint32_t target = 0;  ///< version to serve after the commit
  /// Publication store root (`latest`, `updates/weight_vNNNNNN/`): the folder holding the version directories is
  /// `store / "updates"`.
  std::filesystem::path store;
  /// The target as a FULL checkpoint the harness materialized (disk mode's prepare on the engine's host), for
  /// protocols whose server does not prepare (Protocol::server_prepares false); else empty.
  std::filesystem::path checkpoint_dir;
  /// The engine's own mutable checkpoint directory (Stitch's `local_checkpoint_dir`): under the server's workdir.
  std::filesystem::path local_checkpoint_dir;
  /// The boot checkpoint (FULL v0): Stitch's `base_checkpoint_dir`.
  std::filesystem::path base_checkpoint_dir;
  SyncModeKind mode = SyncModeKind::Disk;
  PauseMode pause = PauseMode::Drain;
  int tp = 1;                 ///< TP ranks of the engine (a tensor payload list has one entry per rank)
  uint64_t bucket_bytes = 0;  ///< refit: most payload bytes in one request (the cell's bucket_bytes)
};

/// The role of one call of a commit sequence: pause calls run first, then the commit calls, then the continue
/// calls, which always run (also after a failed commit call), as a real client's `finally`.
enum class CallRole { Pause, Commit, Continue };
struct CommitCall {
  CallRole role = CallRole::Commit;
  HttpRequest request;
};

/// A /generate answer as the protocol reports it.
struct GenerateResult {
  GenerateResponse response;  ///< response.weight_version is unset (0): `version` is what the server said
  WeightVersion version;      ///< as reported (SGLang: meta_info.weight_version, read per output chunk)
  /// Per output token, when the server reports it (wsbench serve's extras); empty otherwise.
  std::vector<WeightVersion> step_versions;
};

/// Per-rank checksums as the protocol reports them.
struct RankChecksums {
  std::vector<std::map<std::string, std::string>> ranks;  ///< index = TP rank: name -> hex
  /// What was hashed, for the tables: e.g. "per parameter, SGLang /weights_checker".
  std::string basis;
};

class Protocol {
 public:
  virtual ~Protocol() = default;
  virtual std::string_view name() const = 0;
  /// The sync modes this protocol can drive.
  virtual std::vector<SyncModeKind> modes() const = 0;
  /// The pause modes its commit can run under, and the one used when a cell names none.
  virtual std::vector<PauseMode> pause_modes() const = 0;
  virtual PauseMode default_pause_mode() const = 0;
  /// True when the server prepares `mode` itself (an endpoint); false: the harness materializes the target
  /// checkpoint on the engine's host (disk mode's prepare) and the commit reloads it (UpdateSpec::checkpoint_dir).
  virtual bool server_prepares(SyncModeKind mode) const = 0;

  /// Readiness probe: 200 when serving.
  virtual HttpRequest health() const;
  virtual HttpRequest generate(const GenerateRequest& request) const = 0;
  /// Throws Error(Format) naming the endpoint and the field when the answer lacks it or has another type.
  virtual GenerateResult parse_generate(const nlohmann::json& reply) const = 0;
  virtual HttpRequest weight_version() const = 0;
  virtual WeightVersion parse_weight_version(const nlohmann::json& reply) const = 0;
  /// The server-side prepare, or nullopt when server_prepares(spec.mode) is false.
  virtual std::optional<HttpRequest> prepare(const UpdateSpec& spec) const = 0;
  /// The calls of one commit, in order (CallRole).
  virtual std::vector<CommitCall> commit(const UpdateSpec& spec) const = 0;
  /// Judges a JSON answer of a prepare, pause, commit or continue call with a 2xx status. Throws Error(State)
  /// naming the endpoint with the server's message when it says it failed (`success: false`), Error(Format)
  /// when a required field is missing.
  virtual void check_update_reply(const HttpRequest& request, const nlohmann::json& reply) const = 0;
  /// The checksum request, or nullopt when the protocol has none (the checksum check is then skipped).
  virtual std::optional<HttpRequest> checksums() const = 0;
  virtual RankChecksums parse_checksums(const nlohmann::json& reply) const = 0;
  /// True when a request to this endpoint answers text/plain (SGLang's /flush_cache): the client does not parse.
  virtual bool plain_text(const HttpRequest& request) const;
};

/// Runs the calls of one commit through `run` in a real client's order: the pause calls, then the commit calls (none
/// after a failure), then the continue calls always (a client's `finally`: a paused server otherwise stays paused).
/// Rethrows the first failure.
void run_commit_calls(const std::vector<CommitCall>& calls, const std::function<void(const HttpRequest&)>& run);

/// "sglang", "stitch-v0.5.15", "stitch-v0.5.15-host-runtime", "stitch-v0.5.16", "stitch-staging", "vllm".
const std::vector<std::string>& protocol_names();
/// Throws Error(Format) naming `name` and the known protocols.
std::unique_ptr<Protocol> make_protocol(std::string_view name);
/// "" when `protocol` can drive `mode` under `pause`, else why not (names the protocol and what it supports).
std::string protocol_support(const Protocol& protocol, SyncModeKind mode, PauseMode pause);

// Helpers for protocol files: strict field access naming the endpoint and the field (Error(Format)).
namespace wire {
const nlohmann::json& field(const nlohmann::json& object, const std::string& key, const std::string& endpoint);
std::string string_field(const nlohmann::json& object, const std::string& key, const std::string& endpoint);
bool bool_field(const nlohmann::json& object, const std::string& key, const std::string& endpoint);
/// `success: false` -> Error(State) "ENDPOINT: the server refused: MESSAGE".
void expect_success(const nlohmann::json& reply, const std::string& endpoint);
}  // namespace wire

}  // namespace wsb
