#pragma once
// The one interface the profiler uses to talk to an engine, so that an HTTP client for real engine servers
// (wsbench serve, an SGLang-fork server) can replace the embedded engine without touching the profiler.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.hpp"
#include "engine_api/launcher.hpp"

namespace wsb {

/// Engine operations the profiler needs. Errors are wsb::Error with the engine's message.
class EngineClient {
 public:
  virtual ~EngineClient() = default;
  /// response.weight_version is the served version's number; step_versions when the engine reports them.
  virtual GenerateResponse generate(const GenerateRequest& request) = 0;
  virtual PrepareReport prepare(uint32_t target) = 0;
  /// report.seconds: the commit as this client timed it (for a protocol with pause and continue calls, from the
  /// pause call's start to the continue call's end): an upper bound of the pause. report.pause_seconds: the pause
  /// as the engine measured it, nullopt when the engine does not report one.
  virtual CommitReport commit(uint32_t target) = 0;
  /// Per rank: name -> hex, over what checksum_basis() says. Empty when reports_checksums() is false.
  virtual std::vector<std::map<std::string, std::string>> storage_checksums() = 0;
  /// False when the engine offers no checksums (the checksum check is then skipped, naming why).
  virtual bool reports_checksums() const { return true; }
  /// What storage_checksums() hashes, for the tables.
  virtual std::string checksum_basis() const { return "runtime storages, xxh3-128 per storage"; }
  /// Things the cell should know that are not failures (e.g. a server that reports the version "default").
  virtual std::vector<std::string> warnings() const { return {}; }
  /// Per rank, per storage: address and size; empty when the engine does not report them (the pointer check is
  /// then skipped).
  virtual std::vector<std::vector<StoragePointer>> storage_pointers() = 0;
  virtual uint32_t weight_version() = 0;
  virtual bool healthy() = 0;
  /// Host memory the sync mode holds (canonical image, rank images, staging), bytes; nullopt when the engine does
  /// not report it.
  virtual std::optional<ModeMemory> mode_memory() = 0;
  /// Phases of the boot (native load) of this engine; empty when the engine does not report them.
  virtual std::vector<PhaseRecord> boot_phases() = 0;
  /// False when the engine's rejections carry no ErrorKind (a server without `error_kind`): they then arrive as
  /// ErrorKind::State, and a check that wants a particular kind accepts any rejection.
  virtual bool reports_error_kinds() const { return true; }
  /// Stops the engine now and says how (a server process: pid, how it was stopped, exit status, log); null for an
  /// in-process engine. Later calls to the other operations throw.
  virtual nlohmann::json shutdown() { return nullptr; }
};

/// How an HTTP engine's server is started for one boot (MatrixCell's server_* fields).
struct HttpServerSpec {
  /// Command template; placeholders inside any element: {self} {profiles} {model} {mode} {commit_strategy} {tp}
  /// {store} {checkpoint} {version} {workdir} {host} {port} {prepare_threads} {layers} {experts}.
  std::vector<std::string> command;
  Launcher launcher = builtin_launchers().at("native");  ///< the cell's runtime: "{cell}" becomes the command
  double ready_timeout_s = 60;    ///< spawn -> GET /health answers 200
  double stop_timeout_s = 5;      ///< SIGTERM -> exit, then SIGKILL
  double request_timeout_s = 300; ///< one request (prepare and commit included)
  std::filesystem::path self;     ///< the wsbench executable ({self})
  std::filesystem::path profiles_dir;  ///< {profiles}
};

/// How to boot an engine for one trial.
struct EngineLaunch {
  /// The engine: embedded, exactly these options; http, the server command's placeholders and serve flags are
  /// taken from them (profile, tp, sync, store, workdir, prepare_threads, backend).
  EngineOptions options;
  std::string engine = "embedded";  ///< "embedded" (in-process) | "http" (a server started from `server`)
  HttpServerSpec server{};          ///< http only
  std::string protocol = "stitch-staging";  ///< http only: engine_api/protocols/protocol.hpp
  /// What requests in flight see during a commit (core/pause_mode.hpp); nullopt: the protocol's default (http), the
  /// engine's retract (embedded).
  std::optional<PauseMode> pause_mode{};
  std::optional<int> layers{}, experts{};  ///< the profile's scale ({layers}, {experts} of the server command)
};

/// Boots a fresh engine of `launch.engine` on the FULL checkpoint `checkpoint_dir` at `version`: in process, or a
/// server process started and waited for (HttpEngineClient). Throws Error naming what failed (for a server: the
/// endpoint and the problem, or how the process ended).
std::unique_ptr<EngineClient> start_engine(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                           uint32_t version);

/// In-process engine. The constructor boots a fresh engine with a native load of `checkpoint_dir` at `version`.
class EmbeddedEngineClient final : public EngineClient {
 public:
  EmbeddedEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir, uint32_t version);
  GenerateResponse generate(const GenerateRequest& request) override { return engine_->generate(request); }
  PrepareReport prepare(uint32_t target) override { return engine_->prepare(target); }
  CommitReport commit(uint32_t target) override {
    return engine_->commit(target, pause_mode_.value_or(PauseMode::Retract));
  }
  std::vector<std::map<std::string, std::string>> storage_checksums() override { return engine_->storage_checksums(); }
  std::vector<std::vector<StoragePointer>> storage_pointers() override { return engine_->storage_pointers(); }
  uint32_t weight_version() override { return engine_->weight_version(); }
  bool healthy() override { return engine_->healthy(); }
  std::optional<ModeMemory> mode_memory() override { return engine_->mode().memory(); }
  std::vector<PhaseRecord> boot_phases() override { return load_report_.phases; }

 private:
  std::unique_ptr<Engine> engine_;
  LoadReport load_report_;
  std::optional<PauseMode> pause_mode_;
};

}  // namespace wsb
