#include "engine_api/engine_client.hpp"

namespace wsb {

EmbeddedEngineClient::EmbeddedEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                           uint32_t version) {
  engine_ = std::make_unique<Engine>(launch.options);
  pause_mode_ = launch.pause_mode;
  load_report_ = engine_->load_native(checkpoint_dir, version);
}

}  // namespace wsb
