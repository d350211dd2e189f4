// Build of engine/quant without CUDA: every device entry point throws Error(Resource) "... built without CUDA".
#ifndef WSBENCH_HAVE_CUDA
#include <string>

#include "engine/quant/device_linear.hpp"
#include "engine/quant/device_staging.hpp"
#include "engine/quant/device_util.hpp"
#include "engine/quant/nvfp4_swizzle_device.hpp"
#include "core/errors.hpp"

namespace wsb {

namespace {

[[noreturn]] void no_cuda(const std::string& what) {
  throw Error(ErrorKind::Resource, what + ": built without CUDA (no device kernels in this build)");
}

}  // namespace

void launch_linear_matvec(const DeviceLinear&, const int32_t*, int, const float*, int64_t, float*, cudaStream_t) {
  no_cuda("launch_linear_matvec");
}

struct DeviceStaging::Impl {};

DeviceStaging::DeviceStaging(uint64_t, int) { no_cuda("DeviceStaging"); }
DeviceStaging::~DeviceStaging() = default;
uint64_t DeviceStaging::budget_bytes() const { return 0; }
uint64_t DeviceStaging::half_bytes() const { return 0; }
int DeviceStaging::device() const { return 0; }
bool DeviceStaging::has_bounce_buffer() const { return false; }

void nvfp4_scale_swizzle_device(const uint8_t*, int64_t, int64_t, int64_t, uint8_t*, DeviceStaging&, cudaStream_t) {
  no_cuda("nvfp4 scale swizzle (staged)");
}

void nvfp4_scale_swizzle_launch(const uint8_t*, int64_t, int64_t, int64_t, uint8_t*, cudaStream_t) {
  no_cuda("nvfp4 scale swizzle (device)");
}

DeviceBuffer::DeviceBuffer(uint64_t) { no_cuda("DeviceBuffer"); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::upload(const void*, uint64_t, uint64_t) { no_cuda("DeviceBuffer::upload"); }
void DeviceBuffer::download(void*, uint64_t, uint64_t) const { no_cuda("DeviceBuffer::download"); }
void DeviceBuffer::fill(uint8_t) { no_cuda("DeviceBuffer::fill"); }

DeviceGraph::DeviceGraph(const std::function<void(cudaStream_t)>&) { no_cuda("DeviceGraph"); }
DeviceGraph::~DeviceGraph() = default;
void DeviceGraph::release() noexcept {}
void DeviceGraph::replay() { no_cuda("DeviceGraph::replay"); }

void device_synchronize() { no_cuda("device_synchronize"); }

}  // namespace wsb
#endif
