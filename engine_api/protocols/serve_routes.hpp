#pragma once
// What `wsbench serve --protocol P` answers: the embedded engine behind protocol P's HTTP API, field for field,
// status for status (plain-text answers included), with P's lock semantics, so every adapter can be driven
// against a server in CI. Each protocol's routes live beside its client table (`<protocol>_routes.cpp`); the
// listening, faults and wsbench extras are in engine_api/serve.cpp.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/weight_version.hpp"
#include "engine/engine.hpp"
#include "engine_api/protocols/protocol.hpp"

namespace wsb {

/// The last prepare and commit the server ran, for GET /wsbench/last_update (wsbench serve's own extra: a real
/// server reports no pause, so the harness can measure it only here).
struct LastUpdate {
  std::optional<PrepareReport> prepare;
  std::optional<CommitReport> commit;  ///< commit.pause_seconds: gate closed -> reopened (pause() to resume())
};

/// State every protocol's routes share. Handlers run on the HTTP server's thread pool.
class ServeState {
 public:
  ServeState(Engine& engine, WeightVersion boot_version, std::filesystem::path boot_checkpoint,
             std::filesystem::path workdir);

  Engine& engine() { return engine_; }
  const std::filesystem::path& boot_checkpoint() const { return boot_checkpoint_; }
  /// Server-private files (a Stitch fork's local checkpoint directory lives here unless the request names one).
  const std::filesystem::path& workdir() const { return workdir_; }

  /// The version the server reports now (SGLang: str, "default" when booted without --weight-version).
  WeightVersion served_version() const;
  /// The text the server reports for engine version `engine_version` (a token's or a response's).
  WeightVersion version_text(uint32_t engine_version) const;
  /// The engine version to commit for a reported version `text`: its number when numeric, else a fresh number
  /// above every one used (the engine needs a new number to tell requests the weights changed). nullopt `text`
  /// (the request named no weight_version): the served text is kept, the engine still moves to a fresh number.
  uint32_t engine_version_for(const std::optional<std::string>& text);
  /// Records that engine version `engine_version` is served under `text` from now on.
  void set_served(uint32_t engine_version, const WeightVersion& text);
  /// The engine version served before the last set_served, nullopt before the first.
  std::optional<uint32_t> previous_served() const;

  /// SGLang's model_update_lock (tokenizer_manager.py:654-657, 1767-1776 at modal-projects/sglang@8905cbd42):
  /// /generate holds it shared to its last output; an update of an unpaused server takes it exclusively (it
  /// drains requests in flight and blocks new ones); an update of a paused server skips it.
  std::shared_mutex& model_update_lock() { return model_update_lock_; }

  /// The pause mode of a /pause_generation in effect, or nullopt (SGLang's is_pause).
  std::optional<PauseMode> pause_mode() const;
  void set_pause_mode(std::optional<PauseMode> mode);

  /// `wsbench serve --fault version-backwards` only: runs on every generate answer before it is sent.
  std::function<void(GenerateResult&)> on_generate;

  void record_prepare(const PrepareReport& report);
  void record_commit(const CommitReport& report);
  LastUpdate last_update() const;

 private:
  Engine& engine_;
  std::filesystem::path boot_checkpoint_, workdir_;
  std::shared_mutex model_update_lock_;
  mutable std::mutex mu_;  // guards the members below
  std::map<uint32_t, WeightVersion> texts_;
  uint32_t served_engine_version_ = 0;
  std::optional<uint32_t> previous_served_;
  uint32_t highest_engine_version_ = 0;
  std::optional<PauseMode> pause_mode_;
  LastUpdate last_;
};

/// One route: a handler from the parsed request (body parsed as JSON when the request had one; a body that is not
/// JSON never reaches it) to the reply.
struct Route {
  std::string method;  ///< "GET" | "POST"
  std::string path;
  std::function<HttpReply(const HttpRequest&)> handler;
};

/// The routes of protocol `name` over `state`. Throws Error(Format) for an unknown protocol.
std::vector<Route> protocol_routes(std::string_view name, ServeState& state);

/// Reply helpers for route files.
HttpReply json_reply(int status, const nlohmann::json& body);
HttpReply text_reply(int status, std::string text);

/// The engine's answer to a generate request as wsbench serve reports it: version texts for the response and,
/// with extras, per token.
GenerateResult serve_generate(ServeState& state, const GenerateRequest& request);

}  // namespace wsb
