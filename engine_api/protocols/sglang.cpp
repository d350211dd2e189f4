#include "engine_api/protocols/factories.hpp"

#include "core/errors.hpp"

namespace wsb {

std::unique_ptr<Protocol> make_sglang_protocol() {
  throw Error(ErrorKind::State, "protocol table 'sglang' is not built in this tree yet");
}

}  // namespace wsb
