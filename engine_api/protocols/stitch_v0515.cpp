// The Stitch SGLang fork with /pull_weights: stitch-sglang-v0.5.15-post1 (modal-projects/sglang@557e19e1b, "F")
// as the Stitch client of modal-projects/stitch@98f8807 drives it (src/stitch/engines/sglang.py:47-100 there), and
// its -post1-host-runtime branch (@1d2290684, "H"), whose pull can also advance a pinned host image that
// /update_weights_from_prepared commits. Paths below are under python/sglang/srt/ of the fork.
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_family.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

/// The client's reload timeout covers both the pull and the reload (stitch@98f8807 src/stitch/engines/sglang.py:30).
constexpr double kReloadTimeoutS = 600;

class StitchV0515Protocol final : public sglang::FamilyProtocol {
 public:
  explicit StitchV0515Protocol(bool host_runtime) : host_runtime_(host_runtime) {}

  std::string_view name() const override { return host_runtime_ ? "stitch-v0.5.15-host-runtime" : "stitch-v0.5.15"; }
  std::vector<SyncModeKind> modes() const override {
    if (host_runtime_) return {SyncModeKind::Disk, SyncModeKind::Cpu};
    return {SyncModeKind::Disk};
  }
  /// Drain: a cell that names no pause mode serves exact responses only. The Stitch client's default commit mode is
  /// in_place (stitch@98f8807 src/stitch/sync.py:58); a cell names it explicitly (with accept_mixed_responses).
  PauseMode default_pause_mode() const override { return PauseMode::Drain; }
  bool server_prepares(SyncModeKind) const override { return true; }

  /// POST /pull_weights {local_checkpoint_dir, source_dir: the folder of the weight_vNNNNNN/ directories,
  /// target_version: int} (managers/io_struct.py:1543-1551 of F); H's cpu mode adds prepare "runtime"
  /// (io_struct.py:1569-1571 of H).
  std::optional<HttpRequest> prepare(const UpdateSpec& spec) const override {
    json body{{"local_checkpoint_dir", spec.local_checkpoint_dir.string()},
              {"source_dir", (spec.store / "updates").string()},
              {"target_version", spec.target}};
    if (host_runtime_ && spec.mode == SyncModeKind::Cpu) body["prepare"] = "runtime";
    HttpRequest request{"POST", "/pull_weights", {}, std::move(body)};
    request.timeout_s = kReloadTimeoutS;
    return request;
  }

  /// disk: POST /update_weights_from_disk {model_path: the pulled local checkpoint, weight_version: str(v),
  /// flush_cache: false} (the client's commit, stitch@98f8807 src/stitch/engines/sglang.py:68-82); H's cpu mode:
  /// POST /update_weights_from_prepared {weight_version: str(v), flush_cache: false}, the version being exactly
  /// str(target_version) of the pull (H io_struct.py:1543-1551; weight_sync/host_runtime.py:250-254).
  std::vector<CommitCall> commit(const UpdateSpec& spec) const override {
    HttpRequest request;
    if (spec.mode == SyncModeKind::Cpu) {
      request = HttpRequest{"POST",
                            "/update_weights_from_prepared",
                            {},
                            json{{"weight_version", sglang::version_text(spec.target)}, {"flush_cache", false}}};
    } else {
      request = HttpRequest{"POST",
                            "/update_weights_from_disk",
                            {},
                            json{{"model_path", spec.local_checkpoint_dir.string()},
                                 {"weight_version", sglang::version_text(spec.target)},
                                 {"flush_cache", false}}};
    }
    request.timeout_s = kReloadTimeoutS;
    return sglang::paused_commit(spec.pause, {request});
  }

 private:
  bool host_runtime_;
};

}  // namespace

std::unique_ptr<Protocol> make_stitch_v0515_protocol(bool host_runtime) {
  return std::make_unique<StitchV0515Protocol>(host_runtime);
}

}  // namespace wsb
