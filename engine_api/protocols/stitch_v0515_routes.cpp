#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::vector<Route> stitch_v0515_routes(ServeState&, bool) {
  throw Error(ErrorKind::State, "routes 'stitch_v0515' are not built in this tree yet");
}

}  // namespace wsb
