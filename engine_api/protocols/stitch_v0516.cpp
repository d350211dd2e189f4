// The stage/cpu generation of the Stitch SGLang fork as the Stitch client drives it (modal-projects/stitch@a250dc3,
// src/stitch/engines/sglang.py; the fork's API in cookbook/common/SGLANG_FORK.md:39-72): a stage that prepares a
// target on disk or in rank-ready CPU images while the engine serves, then a commit from disk or from CPU.
#include <fmt/format.h>

#include "core/errors.hpp"
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "models/checkpoint/checkpoint.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

/// The logical version of the base checkpoint: what its index records (wsbench's FULL checkpoints carry it), else 0
/// (SGLANG_FORK.md:54-55: base_version "defaults to 0").
uint32_t base_version_of(const std::filesystem::path& base) {
  if (base.empty() || !std::filesystem::exists(base / kIndexFileName)) return 0;
  const CheckpointIndex index = read_checkpoint_index(base / kIndexFileName);
  auto it = index.metadata.find("version");
  if (it == index.metadata.end()) return 0;
  const WeightVersion v = WeightVersion::parse(it->second);
  if (!v.value) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: metadata version '{}' is not a number", (base / kIndexFileName).string(), it->second));
  }
  return *v.value;
}

class StitchV0516Protocol final : public sglang::FamilyProtocol {
 public:
  std::string_view name() const override { return "stitch-v0.5.16"; }
  std::vector<SyncModeKind> modes() const override { return {SyncModeKind::Disk, SyncModeKind::Cpu}; }
  /// Drain: a cell that names no pause mode serves exact responses only. The Stitch client's default commit mode is
  /// in_place: pause, commit, continue (src/stitch/sync.py:76, 163-173); a cell names it explicitly (with
  /// accept_mixed_responses).
  PauseMode default_pause_mode() const override { return PauseMode::Drain; }
  bool server_prepares(SyncModeKind) const override { return true; }

  /// POST /stage_weight_update {base_checkpoint_dir, base_version (the boot version), target_version, destination,
  /// checkpoint_source_dir (the folder of the weight_vNNNNNN/ directories), local_checkpoint_dir (disk only)}
  /// (src/stitch/engines/sglang.py:86-92, 180-204). The client's one-time initialization before the replica serves
  /// (a stage of the base version without checkpoint_source_dir, :94-101) is not part of an update: wsbench serve's
  /// engine sets its mode up at the native load, and the route accepts that call as a no-op.
  std::optional<HttpRequest> prepare(const UpdateSpec& spec) const override {
    const bool disk = spec.mode == SyncModeKind::Disk;
    json body{{"base_checkpoint_dir", spec.base_checkpoint_dir.string()},
              {"base_version", base_version_of(spec.base_checkpoint_dir)},
              {"target_version", spec.target},
              {"destination", disk ? "disk" : "cpu"},
              {"checkpoint_source_dir", (spec.store / "updates").string()}};
    if (disk) body["local_checkpoint_dir"] = spec.local_checkpoint_dir.string();
    HttpRequest request{"POST", "/stage_weight_update", {}, std::move(body)};
    request.timeout_s = sglang::kStageTimeoutS;
    return request;
  }

  /// disk: POST /update_weights_from_disk {model_path: the local checkpoint, load_format: "auto" (the client's
  /// default disk_load_format), weight_version: str(v), flush_cache: false}; cpu: POST /update_weights_from_cpu
  /// {target_version: int, flush_cache: false} (src/stitch/engines/sglang.py:103-129).
  std::vector<CommitCall> commit(const UpdateSpec& spec) const override {
    HttpRequest request;
    if (spec.mode == SyncModeKind::Cpu) {
      request = HttpRequest{
          "POST", "/update_weights_from_cpu", {}, json{{"target_version", spec.target}, {"flush_cache", false}}};
    } else {
      request = HttpRequest{"POST",
                            "/update_weights_from_disk",
                            {},
                            json{{"model_path", spec.local_checkpoint_dir.string()},
                                 {"load_format", "auto"},
                                 {"weight_version", sglang::version_text(spec.target)},
                                 {"flush_cache", false}}};
    }
    request.timeout_s = sglang::kUpdateTimeoutS;
    return sglang::paused_commit(spec.pause, {request});
  }
};

}  // namespace

std::unique_ptr<Protocol> make_stitch_v0516_protocol() { return std::make_unique<StitchV0516Protocol>(); }

}  // namespace wsb
