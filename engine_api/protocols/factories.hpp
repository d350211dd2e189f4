#pragma once
// One client table and one route set per protocol file; protocol.cpp and serve_routes.cpp dispatch by name.
#include <memory>
#include <vector>

#include "engine_api/protocols/protocol.hpp"
#include "engine_api/protocols/serve_routes.hpp"

namespace wsb {

std::unique_ptr<Protocol> make_sglang_protocol();                      // sglang.cpp
std::unique_ptr<Protocol> make_stitch_v0515_protocol(bool host_runtime);  // stitch_v0515.cpp
std::unique_ptr<Protocol> make_stitch_v0516_protocol();               // stitch_v0516.cpp
std::unique_ptr<Protocol> make_stitch_staging_protocol();             // stitch_staging.cpp
std::unique_ptr<Protocol> make_vllm_protocol();                       // vllm.cpp

std::vector<Route> sglang_routes(ServeState& state);                        // sglang_routes.cpp
std::vector<Route> stitch_v0515_routes(ServeState& state, bool host_runtime);  // stitch_v0515_routes.cpp
std::vector<Route> stitch_v0516_routes(ServeState& state);                  // stitch_v0516_routes.cpp
std::vector<Route> stitch_staging_routes(ServeState& state);                // stitch_staging_routes.cpp
std::vector<Route> vllm_routes(ServeState& state);                          // vllm_routes.cpp

}  // namespace wsb
