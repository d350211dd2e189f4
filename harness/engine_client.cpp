#include "harness/engine_client.hpp"

namespace wsb {

EmbeddedEngineClient::EmbeddedEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                           uint32_t version) {
  EngineOptions options{launch.profile, launch.tp, launch.mode, launch.store, launch.workdir, launch.prepare_threads};
  options.backend = launch.backend;
  options.device = launch.device;
  options.cupti = launch.cupti;
  options.commit_strategy = launch.commit_strategy;
  options.refit_transport = launch.refit_transport;
  options.refit_bucket_bytes = launch.refit_bucket_bytes;
  options.refit_base_gpu_id = launch.refit_base_gpu_id;
  engine_ = std::make_unique<Engine>(std::move(options));
  load_report_ = engine_->load_native(checkpoint_dir, version);
}

}  // namespace wsb
