#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::vector<Route> stitch_staging_routes(ServeState&) {
  throw Error(ErrorKind::State, "routes 'stitch_staging' are not built in this tree yet");
}

}  // namespace wsb
