#pragma once
// NVTX ranges in one domain ("wsbench") with registered strings, so Nsight Systems shows every prepare and commit
// phase on the thread that ran it. NVTX3 is header-only: without a tool attached (nsys sets
// NVTX_INJECTION64_PATH) every call is a cheap no-op. Builds without the NVTX3 headers compile these to nothing.
#include <string>

namespace wsb {

/// Pushes a range named `name` on the calling thread for the object's lifetime (push in the constructor, pop in
/// the destructor). The name is registered once per process (nvtxDomainRegisterStringA) and cached. Never throws.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) noexcept;
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

/// True when this build has NVTX3 (the ranges reach a tool that is attached).
bool nvtx_built();

}  // namespace wsb
