#include <fmt/format.h>

#include "engine_api/engine_client.hpp"
#include "engine_api/http_engine_client.hpp"
#include "core/errors.hpp"

namespace wsb {

std::unique_ptr<EngineClient> start_engine(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                           uint32_t version) {
  if (launch.engine == "embedded") return std::make_unique<EmbeddedEngineClient>(launch, checkpoint_dir, version);
  if (launch.engine == "http") return std::make_unique<HttpEngineClient>(launch, checkpoint_dir, version);
  throw Error(ErrorKind::Format, fmt::format("engine '{}' is unknown (embedded, http)", launch.engine));
}

}  // namespace wsb
