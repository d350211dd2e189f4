#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::vector<Route> vllm_routes(ServeState&) {
  throw Error(ErrorKind::State, "routes 'vllm' are not built in this tree yet");
}

}  // namespace wsb
