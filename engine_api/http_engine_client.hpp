#pragma once
// The HTTP engine adapter: EngineClient over the engine API of engine_api/http_api.hpp, for `wsbench serve` and
// SGLang-fork servers. Every failure names the endpoint and what was wrong: no answer (with how the server process
// ended, when this client started it), an HTTP error status with the server's message, a body that is not JSON or
// not of the expected shape, a weight version lower than one this client already saw from the same endpoint.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine_api/engine_client.hpp"
#include "engine_api/server_process.hpp"

namespace wsb {

struct HttpTimeouts {
  double connect_s = 2;
  double request_s = 300;  ///< read timeout of one request
};

class HttpEngineClient final : public EngineClient {
 public:
  /// Talks to a server already listening on host:port (nothing is started or stopped). `store` is sent as
  /// checkpoint_source_dir of every prepare (empty: not sent).
  HttpEngineClient(std::string host, int port, std::filesystem::path store, HttpTimeouts timeouts = {});
  /// Starts the server of `spec` for a boot of `checkpoint_dir` at `version` (log: workdir/server.log) through the
  /// spec's launcher and waits until GET /health answers 200. Throws Error(Io) naming GET /health when the server
  /// does not become healthy within spec.ready_timeout_s (with the last answer) or exits first (with its status
  /// and log tail).
  HttpEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir, uint32_t version);
  ~HttpEngineClient() override;

  GenerateResponse generate(const GenerateRequest& request) override;
  PrepareReport prepare(uint32_t target) override;
  CommitReport commit(uint32_t target) override;
  std::vector<std::map<std::string, std::string>> storage_checksums() override;
  std::vector<std::vector<StoragePointer>> storage_pointers() override;
  uint32_t weight_version() override;
  bool healthy() override;
  std::optional<ModeMemory> mode_memory() override;
  std::vector<PhaseRecord> boot_phases() override;
  bool reports_error_kinds() const override;
  nlohmann::json shutdown() override;

  int port() const { return port_; }

 private:
  /// One request; `optional`: a 404 returns nullopt (an extra the server does not offer). Throws as described above.
  std::optional<nlohmann::json> call(const std::string& method, const std::string& path, const nlohmann::json* body,
                                     bool optional = false, double timeout_s = 0);
  /// Throws Error(Format) when `version` is lower than the highest this endpoint reported before.
  void check_forward(const std::string& endpoint, uint32_t version);
  void wait_healthy(double timeout_s);
  std::string process_note();

  std::string host_;
  int port_ = 0;
  HttpTimeouts timeouts_;
  std::filesystem::path store_;
  std::unique_ptr<ServerProcess> process_;
  double stop_timeout_s_ = 5;
  mutable std::mutex mu_;  // guards the members below
  std::map<std::string, uint32_t> highest_;
  bool kinds_seen_ = true;
  std::optional<std::string> stopped_;
};

/// The command of `spec` for one boot: placeholders substituted, then placed into the launcher's "{cell}".
std::vector<std::string> server_command(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                        uint32_t version, int port);

/// The default server command: `{self} --profiles {profiles} serve ...` (wsbench serve on loopback), with
/// --layers/--experts when the launch is scaled, --backend unless cpu, and the cpu mode's --commit-strategy and
/// --delta-staging-bytes unless they are the defaults.
std::vector<std::string> default_serve_command(const EngineLaunch& launch);

}  // namespace wsb
