#include "core/nvtx.hpp"

#ifdef WSBENCH_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <unordered_map>
#endif

namespace wsb {

#ifdef WSBENCH_HAVE_NVTX
namespace {

nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t handle = nvtxDomainCreateA("wsbench");
  return handle;
}

// Registered strings make a push carry a handle instead of a string the tool must copy and intern each time.
nvtxStringHandle_t registered(const std::string& name) {
  static std::mutex mu;
  static std::unordered_map<std::string, nvtxStringHandle_t> handles;
  std::lock_guard lock(mu);
  auto it = handles.find(name);
  if (it == handles.end()) it = handles.emplace(name, nvtxDomainRegisterStringA(domain(), name.c_str())).first;
  return it->second;
}

}  // namespace

NvtxRange::NvtxRange(const std::string& name) noexcept {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  try {
    attributes.message.registered = registered(name);
  } catch (...) {  // out of memory while caching: push an unnamed range rather than throw from a timer
    attributes.messageType = NVTX_MESSAGE_UNKNOWN;
  }
  nvtxDomainRangePushEx(domain(), &attributes);
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(domain()); }

bool nvtx_built() { return true; }
#else
NvtxRange::NvtxRange(const std::string&) noexcept {}
NvtxRange::~NvtxRange() = default;
bool nvtx_built() { return false; }
#endif

}  // namespace wsb
