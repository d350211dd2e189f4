#pragma once
// The one interface the profiler uses to talk to an engine, so that an HTTP client for real engine servers
// (wsbench serve, an SGLang-fork server) can replace the embedded engine without touching the profiler.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.hpp"

namespace wsb {

/// Engine operations the profiler needs. Errors are wsb::Error with the engine's message.
class EngineClient {
 public:
  virtual ~EngineClient() = default;
  virtual GenerateResponse generate(const GenerateRequest& request) = 0;
  virtual PrepareReport prepare(uint32_t target) = 0;
  virtual CommitReport commit(uint32_t target) = 0;
  /// Per rank: storage name -> xxh3-128 hex.
  virtual std::vector<std::map<std::string, std::string>> storage_checksums() = 0;
  virtual std::vector<std::vector<StoragePointer>> storage_pointers() = 0;
  virtual uint32_t weight_version() = 0;
  virtual bool healthy() = 0;
  /// Host memory the sync mode holds (canonical image, rank images, staging), bytes.
  virtual ModeMemory mode_memory() = 0;
  /// Phases of the boot (native load) of this engine; empty when the engine does not report them.
  virtual std::vector<PhaseRecord> boot_phases() = 0;
};

/// How to boot an engine for one trial.
struct EngineLaunch {
  ModelProfile profile;
  int tp = 1;
  std::string mode = "cpu";
  std::filesystem::path store;
  std::filesystem::path workdir;
  int prepare_threads = 2;
  std::string backend = "cpu";   ///< "cpu" | "cuda" (EngineOptions::backend)
  DeviceStorageOptions device{};  ///< cuda backend: H2D chunk and copy streams
  bool cupti = false;            ///< cuda backend: CUPTI summary of every commit
  std::string commit_strategy = "full";  ///< cpu mode: "full" | "device-delta"
};

/// In-process engine. The constructor boots a fresh engine with a native load of `checkpoint_dir` at `version`.
class EmbeddedEngineClient final : public EngineClient {
 public:
  EmbeddedEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir, uint32_t version);
  GenerateResponse generate(const GenerateRequest& request) override { return engine_->generate(request); }
  PrepareReport prepare(uint32_t target) override { return engine_->prepare(target); }
  CommitReport commit(uint32_t target) override { return engine_->commit(target); }
  std::vector<std::map<std::string, std::string>> storage_checksums() override { return engine_->storage_checksums(); }
  std::vector<std::vector<StoragePointer>> storage_pointers() override { return engine_->storage_pointers(); }
  uint32_t weight_version() override { return engine_->weight_version(); }
  bool healthy() override { return engine_->healthy(); }
  ModeMemory mode_memory() override { return engine_->mode().memory(); }
  std::vector<PhaseRecord> boot_phases() override { return load_report_.phases; }

 private:
  std::unique_ptr<Engine> engine_;
  LoadReport load_report_;
};

}  // namespace wsb
