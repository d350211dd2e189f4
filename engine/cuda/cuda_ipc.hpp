#pragma once
// The CUDA backend's DeviceIpc (modes/refit/device_ipc.hpp), for the refit's cuda-ipc transport: exported rings are
// cudaMalloc'd and shared with cudaIpcGetMemHandle; imports use cudaIpcOpenMemHandle. Copies run on a
// non-blocking stream of the allocation's device and are waited for. Compiles without CUDA (every call then throws
// Error(Resource) "... built without CUDA").
#include "modes/refit/device_ipc.hpp"

namespace wsb {

/// The process-wide instance (stateless, thread-safe).
const refit::DeviceIpc& cuda_device_ipc();

}  // namespace wsb
