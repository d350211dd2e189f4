// engine/cuda/pinned.hpp on top of cuda_ops (compiles with and without CUDA).
#include "engine/cuda/pinned.hpp"

#include "engine/cuda/cuda_ops.hpp"

namespace wsb {
namespace {

class CudaHostPinner final : public HostPinner {
 public:
  void pin(void* p, size_t bytes) const override { cuda_ops::host_register(p, bytes); }
  void unpin(void* p) const noexcept override { cuda_ops::host_unregister(p); }
};

}  // namespace

const HostPinner& cuda_host_pinner() {
  static const CudaHostPinner pinner;
  return pinner;
}

bool is_pinned(const void* p) { return cuda_ops::host_is_pinned(p); }

}  // namespace wsb
