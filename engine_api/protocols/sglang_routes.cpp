// wsbench serve --protocol sglang: upstream SGLang's endpoints over the embedded engine. A reload from disk is
// Engine::commit_checkpoint of the named FULL checkpoint (every runtime storage rewritten in place); refit buckets
// of tensors are held until the model is complete, then Engine::commit_canonical (sglang_tensor_update.hpp).
#include "engine_api/protocols/factories.hpp"
#include "engine_api/protocols/sglang_disk_reload.hpp"
#include "engine_api/protocols/sglang_family_routes.hpp"
#include "engine_api/protocols/sglang_tensor_update.hpp"

namespace wsb {
namespace {

struct SglangServer {
  explicit SglangServer(ServeState& state) : family(state), tensors(family) {}
  sglang::FamilyServer family;
  sglang::TensorUpdates tensors;
};

}  // namespace

std::vector<Route> sglang_routes(ServeState& state) {
  auto server = std::make_shared<SglangServer>(state);
  std::vector<Route> routes = server->family.common_routes();
  routes.push_back({"POST", "/update_weights_from_disk", sglang::validated([raw = server.get()](const HttpRequest& r) {
                      return sglang::update_weights_from_disk(raw->family, r);
                    })});
  routes.push_back({"POST", "/update_weights_from_tensor",
                    sglang::validated([raw = server.get()](const HttpRequest& r) { return raw->tensors.handle(r); })});
  return sglang::owned_by(server, std::move(routes));
}

}  // namespace wsb
