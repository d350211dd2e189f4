#pragma once
// The HTTP engine adapter: EngineClient over one weight-update protocol (engine_api/protocols/protocol.hpp), for
// real SGLang, Stitch-fork and vLLM servers and for `wsbench serve --protocol P`. Every failure names the endpoint
// and what was wrong: no answer (with how the server process ended, when this client started it), an HTTP error
// status, a body that is not JSON or lacks a field (with the first 200 bytes of the body), a refusal (the
// server's message), a weight version lower than one this client already saw.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine_api/engine_client.hpp"
#include "engine_api/http_transport.hpp"
#include "engine_api/protocols/protocol.hpp"
#include "engine_api/server_process.hpp"
#include "modes/sync/sync_mode.hpp"

namespace wsb {

/// What an HTTP client needs besides the address.
struct HttpClientSpec {
  std::string protocol = "stitch-staging";
  std::optional<PauseMode> pause_mode;  ///< nullopt: the protocol's default
  EngineOptions options;                ///< profile, tp, sync mode, store, workdir (the harness-side prepare's)
  uint32_t boot_version = 0;            ///< the version the server was booted at ("default" stands for it)
  std::filesystem::path boot_checkpoint;
  HttpTimeouts timeouts{};
};

class HttpEngineClient final : public EngineClient {
 public:
  /// Talks to a server already listening on host:port (nothing is started or stopped). Throws Error(Format) when
  /// the protocol is unknown or cannot drive the mode under the pause mode.
  HttpEngineClient(std::string host, int port, HttpClientSpec spec);
  /// Starts the server of `launch.server` for a boot of `checkpoint_dir` at `version` (log: workdir/server.log)
  /// through its launcher and waits until the protocol's health request answers 200. Throws Error(Io) naming the
  /// endpoint when the server does not become healthy within ready_timeout_s (with the last answer) or exits
  /// first (with its status and log tail).
  HttpEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir, uint32_t version);
  ~HttpEngineClient() override;

  GenerateResponse generate(const GenerateRequest& request) override;
  /// Server-side prepare when the protocol has one; else disk mode's prepare here, on the engine's host (phases
  /// "harness.*"), into workdir/harness-checkpoint, which the commit then names.
  PrepareReport prepare(uint32_t target) override;
  CommitReport commit(uint32_t target) override;
  std::vector<std::map<std::string, std::string>> storage_checksums() override;
  bool reports_checksums() const override;
  std::string checksum_basis() const override;
  std::vector<std::vector<StoragePointer>> storage_pointers() override;
  uint32_t weight_version() override;
  bool healthy() override;
  std::optional<ModeMemory> mode_memory() override;
  std::vector<PhaseRecord> boot_phases() override;
  bool reports_error_kinds() const override { return false; }
  std::vector<std::string> warnings() const override;
  nlohmann::json shutdown() override;

  int port() const { return port_; }
  const Protocol& protocol() const { return *protocol_; }
  PauseMode pause_mode() const { return pause_; }

 private:
  /// One exchange: throws as described above; 2xx answers only. `optional`: a 404 gives nullopt (a wsbench
  /// serve extra that a real server does not offer).
  std::optional<HttpReply> exchange(const HttpRequest& request, bool optional = false);
  /// exchange + JSON parse (Error(Format) with the body excerpt when it is not JSON).
  std::optional<nlohmann::json> exchange_json(const HttpRequest& request, bool optional = false);
  /// The number a reported version stands for: its value; "default" is the boot version (with a warning).
  uint32_t version_number(const WeightVersion& version, const std::string& endpoint);
  void check_forward(const std::string& endpoint, uint32_t version);
  void wait_healthy(double timeout_s);
  std::string process_note();
  UpdateSpec update_spec(uint32_t target) const;

  std::string host_;
  int port_ = 0;
  HttpClientSpec spec_;
  std::unique_ptr<Protocol> protocol_;
  PauseMode pause_ = PauseMode::Drain;
  std::unique_ptr<SyncMode> harness_prepare_;  ///< disk mode on this host, for protocols without a prepare
  std::unique_ptr<ServerProcess> process_;
  double stop_timeout_s_ = 5;
  mutable std::mutex mu_;  // guards the members below
  std::map<std::string, uint32_t> highest_;
  uint32_t served_ = 0;
  std::vector<std::string> warnings_;
  std::optional<std::string> stopped_;
};

/// The command of `launch.server` for one boot: placeholders substituted, then placed into the launcher's
/// "{cell}".
std::vector<std::string> server_command(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                        uint32_t version, int port);

/// The default server command: `{self} --profiles {profiles} serve --protocol P ...` (wsbench serve on loopback),
/// with --layers/--experts when the launch is scaled, --backend unless cpu, the cpu mode's --commit-strategy and
/// --delta-staging-bytes unless they are the defaults, and --weight-version {version} except for protocols whose
/// servers boot as "default" (sglang, vllm), so that the harness sees that case as users do.
std::vector<std::string> default_serve_command(const EngineLaunch& launch);

}  // namespace wsb
