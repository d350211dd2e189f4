// CUDA build of engine/quant/device_util.hpp.
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "engine/quant/cuda_check.cuh"
#include "engine/quant/device_util.hpp"

namespace wsb {

namespace {

void check_range(uint64_t size, uint64_t offset, uint64_t bytes, const char* op) {
  if (offset > size || bytes > size - offset)
    throw Error(ErrorKind::Mismatch, std::string("DeviceBuffer::") + op + ": range [" + std::to_string(offset) + ", " +
                                         std::to_string(offset) + " + " + std::to_string(bytes) +
                                         ") outside the buffer of " + std::to_string(size) + " bytes");
}

}  // namespace

DeviceBuffer::DeviceBuffer(uint64_t bytes) {
  quant::require_device("DeviceBuffer");
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&data_), bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw Error(ErrorKind::Resource, "DeviceBuffer: needs " + std::to_string(bytes) + " bytes of device memory, " +
                                         std::to_string(free_bytes) + " free");
  }
  quant::check_cuda(err, "DeviceBuffer: cudaMalloc of " + std::to_string(bytes) + " bytes");
  size_ = bytes;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, uint64_t bytes, uint64_t offset) {
  check_range(size_, offset, bytes, "upload");
  if (bytes == 0) return;
  quant::check_cuda(cudaMemcpy(data_ + offset, src, bytes, cudaMemcpyHostToDevice),
                    "DeviceBuffer::upload of " + std::to_string(bytes) + " bytes");
}

void DeviceBuffer::download(void* dst, uint64_t bytes, uint64_t offset) const {
  check_range(size_, offset, bytes, "download");
  quant::check_cuda(cudaDeviceSynchronize(), "DeviceBuffer::download: cudaDeviceSynchronize");
  if (bytes == 0) return;
  quant::check_cuda(cudaMemcpy(dst, data_ + offset, bytes, cudaMemcpyDeviceToHost),
                    "DeviceBuffer::download of " + std::to_string(bytes) + " bytes");
}

void DeviceBuffer::fill(uint8_t value) {
  if (size_ == 0) return;
  quant::check_cuda(cudaMemset(data_, value, size_), "DeviceBuffer::fill");
  quant::check_cuda(cudaDeviceSynchronize(), "DeviceBuffer::fill: cudaDeviceSynchronize");
}

DeviceGraph::DeviceGraph(const std::function<void(cudaStream_t)>& enqueue) {
  quant::require_device("DeviceGraph");
  cudaStream_t stream = nullptr;
  quant::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "DeviceGraph: stream");
  stream_ = stream;
  try {
    quant::check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "DeviceGraph: begin capture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue(stream);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);  // leaves capture mode; the partial graph is dropped
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    quant::check_cuda(cudaStreamEndCapture(stream, &graph), "DeviceGraph: end capture");
    graph_ = graph;
    cudaGraphExec_t exec = nullptr;
    quant::check_cuda(cudaGraphInstantiate(&exec, graph, 0), "DeviceGraph: instantiate");
    exec_ = exec;
  } catch (...) {
    release();
    throw;
  }
}

void DeviceGraph::release() noexcept {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  exec_ = graph_ = stream_ = nullptr;
}

DeviceGraph::~DeviceGraph() { release(); }

void DeviceGraph::replay() {
  const auto stream = static_cast<cudaStream_t>(stream_);
  quant::check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream), "DeviceGraph: launch");
  quant::check_cuda(cudaStreamSynchronize(stream), "DeviceGraph: synchronize");
}

void device_synchronize() { quant::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace wsb
