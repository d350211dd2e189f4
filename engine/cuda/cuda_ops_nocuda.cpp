// Build of engine/cuda/cuda_ops.hpp without CUDA: no devices; every operation refuses with Error(Resource).
#ifndef WSBENCH_HAVE_CUDA
#include "engine/cuda/cuda_ops.hpp"
#include "core/errors.hpp"

namespace wsb::cuda_ops {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorKind::Resource, what + ": built without CUDA");
}

}  // namespace

bool built() { return false; }
int visible_devices() { return 0; }
std::string device_name(int device) { refuse("device name of device " + std::to_string(device)); }
void memory_info(int device, uint64_t*, uint64_t*) { refuse("cudaMemGetInfo on device " + std::to_string(device)); }
void* device_alloc(int, uint64_t, const std::string& what) { refuse(what); }
void device_free(int, void*) noexcept {}
void* stream_create(int, const std::string& what) { refuse(what); }
void stream_destroy(int, void*) noexcept {}
std::string stream_synchronize(int, void*) noexcept { return "built without CUDA"; }
void memset_async(int, void*, int, uint64_t, void*, const std::string& what) { refuse(what); }
void copy_h2d_async(int, void*, const void*, uint64_t, void*, const std::string& what) { refuse(what); }
void copy_d2h_async(int, void*, const void*, uint64_t, void*, const std::string& what) { refuse(what); }
void* event_create(int, const std::string& what) { refuse(what); }
void event_record(int, void*, void*, const std::string& what) { refuse(what); }
std::string event_synchronize(int, void*) noexcept { return "built without CUDA"; }
void event_destroy(int, void*) noexcept {}
void device_uuid(int, uint8_t*, const std::string& what) { refuse(what); }
void ipc_get_handle(int, void*, uint8_t*, const std::string& what) { refuse(what); }
void* ipc_open_handle(int, const uint8_t*, const std::string& what) { refuse(what); }
void ipc_close_handle(int, void*) noexcept {}
void host_register(void*, uint64_t bytes) {
  throw Error(ErrorKind::Resource, "pinning " + std::to_string(bytes) + " B of host memory failed: built without CUDA");
}
void host_unregister(void*) noexcept {}
void* host_alloc(uint64_t bytes, const std::string& what) {
  refuse(what + ": cudaHostAlloc of " + std::to_string(bytes) + " B");
}
void host_free(void*) noexcept {}
bool host_is_pinned(const void*) noexcept { return false; }

}  // namespace wsb::cuda_ops
#endif
