// The Stitch SGLang fork started with --weight-update-staging disk|cpu, as the Stitch client of Xiuyu-Li/stitch@3a05662
// drives it (src/stitch/engines/sglang.py `def stage`, `def commit` there): the server owns its staging destination
// (chosen at launch), so a prepare names only the source and the target, and the commit only the target.
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_family.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

class StitchStagingProtocol final : public sglang::FamilyProtocol {
 public:
  std::string_view name() const override { return "stitch-staging"; }
  std::vector<SyncModeKind> modes() const override { return {SyncModeKind::Disk, SyncModeKind::Cpu}; }
  /// Drain: a cell that names no pause mode serves exact responses only. The Stitch client pauses in_place around every
  /// commit (`def pause`: {"mode": "in_place"}); a cell names it explicitly (with accept_mixed_responses).
  PauseMode default_pause_mode() const override { return PauseMode::Drain; }
  bool server_prepares(SyncModeKind) const override { return true; }

  /// POST /prepare_weight_update {checkpoint_source_dir: the folder of the weight_vNNNNNN/ directories,
  /// target_version: int} (`def stage`).
  std::optional<HttpRequest> prepare(const UpdateSpec& spec) const override {
    HttpRequest request{
        "POST",
        "/prepare_weight_update",
        {},
        json{{"checkpoint_source_dir", (spec.store / "updates").string()}, {"target_version", spec.target}}};
    request.timeout_s = sglang::kStageTimeoutS;
    return request;
  }

  /// POST /commit_weight_update {target_version, abort_all_requests: false, torch_empty_cache: false,
  /// flush_cache: false} (`def commit`; the client's flush_cache defaults to false).
  std::vector<CommitCall> commit(const UpdateSpec& spec) const override {
    HttpRequest request{"POST",
                        "/commit_weight_update",
                        {},
                        json{{"target_version", spec.target},
                             {"abort_all_requests", false},
                             {"torch_empty_cache", false},
                             {"flush_cache", false}}};
    request.timeout_s = sglang::kUpdateTimeoutS;
    return sglang::paused_commit(spec.pause, {request});
  }
};

}  // namespace

std::unique_ptr<Protocol> make_stitch_staging_protocol() { return std::make_unique<StitchStagingProtocol>(); }

}  // namespace wsb
