#pragma once
// Page-locked host memory for the CUDA backend: the HostPinner (modes/sync/host_buffer.hpp) that rank images and
// commit staging buffers are created with, so every H2D copy of a commit reads DMA-able memory and no pinning
// happens inside a pause.
#include "modes/sync/host_buffer.hpp"

namespace wsb {

/// The process-wide CUDA pinner: pin = cudaHostRegister(p, bytes, cudaHostRegisterPortable) (portable: every
/// device may DMA from it, as ranks may sit on different GPUs), unpin = cudaHostUnregister. pin throws
/// Error(Resource) "pinning <bytes> B of host memory failed: <cuda error>" when refused (e.g. the memlock limit,
/// or no device), and "... built without CUDA" in a build without CUDA.
const HostPinner& cuda_host_pinner();

/// True when `p` lies in page-locked host memory registered with / allocated by CUDA
/// (cudaPointerGetAttributes(p).type == cudaMemoryTypeHost). False for pageable memory, device memory, without a
/// device or without a CUDA build. For tests, and for the commit to assert that its sources are pinned.
bool is_pinned(const void* p);

}  // namespace wsb
