// Upstream SGLang (modal-projects/sglang@8905cbd42, the upstream main; paths under python/sglang/srt/): a server
// without a prepare endpoint. The harness materializes the target as a FULL checkpoint on the engine's host and the
// commit reloads it: POST /update_weights_from_disk {model_path, weight_version, flush_cache}
// (managers/io_struct.py:1533-1556; entrypoints/http_server.py:1161-1187), under the pause mode's
// /pause_generation and /continue_generation, or unpaused (the model-update writer lock drains,
// managers/tokenizer_manager.py:1751-1782). Mode refit streams the same checkpoint's tensors instead, as
// POST /update_weights_from_tensor buckets (sglang_tensor_buckets.hpp).
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "engine_api/protocols/sglang_tensor_buckets.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

class SglangProtocol final : public sglang::FamilyProtocol {
 public:
  std::string_view name() const override { return "sglang"; }
  std::vector<SyncModeKind> modes() const override { return {SyncModeKind::Disk, SyncModeKind::Refit}; }
  /// No pause call: the plain upstream update, whose writer lock drains requests in flight.
  PauseMode default_pause_mode() const override { return PauseMode::Drain; }
  bool server_prepares(SyncModeKind) const override { return false; }
  std::optional<HttpRequest> prepare(const UpdateSpec&) const override { return std::nullopt; }

  std::vector<CommitCall> commit(const UpdateSpec& spec) const override {
    if (spec.mode == SyncModeKind::Refit)
      return sglang::paused_commit(spec.pause, sglang::tensor_bucket_requests(spec));
    // flush_cache defaults to true, but under an in_place pause the flush fails while requests are held
    // (io_struct.py:1499-1500) and SGLang asserts it succeeded (scheduler_components/weight_updater.py:103-108);
    // upstream flushes with retract only (test/registered/rl/test_update_weights_from_disk.py:185-202).
    HttpRequest reload{"POST",
                       "/update_weights_from_disk",
                       {},
                       json{{"model_path", spec.checkpoint_dir.string()},
                            {"weight_version", sglang::version_text(spec.target)},
                            {"flush_cache", spec.pause != PauseMode::InPlace}}};
    reload.timeout_s = sglang::kUpdateTimeoutS;
    return sglang::paused_commit(spec.pause, {reload});
  }
};

}  // namespace

std::unique_ptr<Protocol> make_sglang_protocol() { return std::make_unique<SglangProtocol>(); }

}  // namespace wsb
