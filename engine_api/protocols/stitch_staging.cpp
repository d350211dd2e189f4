#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::unique_ptr<Protocol> make_stitch_staging_protocol() {
  throw Error(ErrorKind::State, "protocol table 'stitch_staging' is not built in this tree yet");
}

}  // namespace wsb
