#pragma once
// An embedded engine behind one protocol's wsbench serve routes, for the protocol suites: a tiny Llama store
// (FULL v0, DELTA v1..v3), the engine booted natively from v0, ServeState, the routes driven in process, and the
// references an update is judged against (a fresh native load of the target, its per-rank checksums in the
// 16-hex form of SGLang's /weights_checker).
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "engine_api/protocols/serve_routes.hpp"
#include "publication/store.hpp"
#include "publisher/publisher.hpp"
#include "tests/support/route_driver.hpp"
#include "tests/support/test_support.hpp"

namespace wsb::test {

class ProtocolServer {
 public:
  static constexpr uint64_t kSeed = 7;
  static constexpr uint32_t kLast = 3;

  /// Publishes the store, boots the engine in `mode` at v0 (served as `boot_text`: "default" as upstream SGLang
  /// without --weight-version) and builds `protocol`'s routes.
  ProtocolServer(const std::string& protocol, SyncModeKind mode, const std::string& boot_text = "default") {
    publish_tiny(store(), kLast, kSeed);
    engine_ = boot(mode, Store(store()).update_dir(0), 0, "engine");
    state_ = std::make_unique<ServeState>(*engine_, WeightVersion::parse(boot_text), Store(store()).update_dir(0),
                                          dir_ / "server");
    driver_ = std::make_unique<RouteDriver>(protocol, *state_);
  }

  std::filesystem::path store() const { return dir_ / "store"; }
  const TempDir& dir() const { return dir_; }
  Engine& engine() { return *engine_; }
  ServeState& state() { return *state_; }
  const RouteDriver& driver() const { return *driver_; }
  const Protocol& protocol() const { return driver_->protocol(); }

  /// The publisher's FULL checkpoint of `version` (what a harness-side disk prepare materializes).
  std::filesystem::path full_checkpoint(uint32_t version) {
    const auto dir = dir_ / ("full" + std::to_string(version));
    if (!std::filesystem::exists(dir)) write_full_checkpoint(tiny_profile(), kSeed, version, std::nullopt, dir);
    return dir;
  }

  /// Per rank, storage name -> the first 16 hex of the xxh3-128 of a fresh engine natively loaded from `version`.
  std::vector<std::map<std::string, std::string>> native_checksums(uint32_t version) {
    auto fresh = boot(SyncModeKind::Disk, full_checkpoint(version), version, "native" + std::to_string(version));
    auto sums = fresh->storage_checksums();
    for (auto& rank : sums) {
      for (auto& [name, hex] : rank) hex = hex.substr(0, 16);
    }
    return sums;
  }

  /// The update the harness would ask for: served -> target under `pause` (refit in buckets of `bucket_bytes`), the
  /// harness's folders filled in.
  UpdateSpec spec(uint32_t served, uint32_t target, SyncModeKind mode, PauseMode pause, uint64_t bucket_bytes = 0) {
    UpdateSpec s;
    s.tp = static_cast<int>(engine_->layouts().size());
    s.bucket_bytes = bucket_bytes;
    s.served = served;
    s.target = target;
    s.store = store();
    s.mode = mode;
    s.pause = pause;
    s.base_checkpoint_dir = Store(store()).update_dir(0);
    s.local_checkpoint_dir = dir_ / "server" / "engine-checkpoint";
    if (!protocol().server_prepares(mode)) s.checkpoint_dir = full_checkpoint(target);
    return s;
  }

 private:
  std::unique_ptr<Engine> boot(SyncModeKind mode, const std::filesystem::path& checkpoint, uint32_t version,
                               const std::string& name) {
    EngineOptions options{tiny_profile(), 2, SyncOptions{mode}, store(), dir_ / ("work-" + name), 2};
    auto engine = std::make_unique<Engine>(std::move(options));
    engine->load_native(checkpoint, version);
    return engine;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ServeState> state_;
  std::unique_ptr<RouteDriver> driver_;
};

}  // namespace wsb::test
