// Build of engine/cuda/delta_ops.hpp without CUDA: every call refuses with Error(Resource).
#ifndef WSBENCH_HAVE_CUDA
#include <string>

#include "engine/cuda/delta_ops.hpp"
#include "core/errors.hpp"

namespace wsb::cuda_ops {

uint64_t digest64_sum_device(int, const void*, uint64_t, uint64_t*, void*, const char* what) {
  throw Error(ErrorKind::Resource, std::string(what) + ": built without CUDA");
}

void apply_pack_async(int, const void*, uint64_t, uint64_t, void*, const char* what) {
  throw Error(ErrorKind::Resource, std::string(what) + ": built without CUDA");
}

void load_delta_kernels(int, const char* what) {
  throw Error(ErrorKind::Resource, std::string(what) + ": built without CUDA");
}

}  // namespace wsb::cuda_ops
#endif
