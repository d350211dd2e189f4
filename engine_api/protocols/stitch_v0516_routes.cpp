#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::vector<Route> stitch_v0516_routes(ServeState&) {
  throw Error(ErrorKind::State, "routes 'stitch_v0516' are not built in this tree yet");
}

}  // namespace wsb
