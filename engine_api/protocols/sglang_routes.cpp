// wsbench serve --protocol sglang: upstream SGLang's endpoints over the embedded engine. A reload from disk is
// Engine::commit_checkpoint of the named FULL checkpoint (every runtime storage rewritten in place).
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_disk_reload.hpp"
#include "engine_api/protocols/sglang_family_routes.hpp"

namespace wsb {

std::vector<Route> sglang_routes(ServeState& state) {
  auto server = std::make_shared<sglang::FamilyServer>(state);
  std::vector<Route> routes = server->common_routes();
  routes.push_back({"POST", "/update_weights_from_disk", sglang::validated([raw = server.get()](const HttpRequest& r) {
                      return sglang::update_weights_from_disk(*raw, r);
                    })});
  return sglang::owned_by(server, std::move(routes));
}

}  // namespace wsb
