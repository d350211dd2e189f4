#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::unique_ptr<Protocol> make_stitch_v0515_protocol(bool) {
  throw Error(ErrorKind::State, "protocol table 'stitch_v0515' is not built in this tree yet");
}

}  // namespace wsb
