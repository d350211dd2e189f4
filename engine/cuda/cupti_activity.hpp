#pragma once
// The CUPTI side of CuptiTracer (engine/cuda/cupti_tracer.hpp): loading libcupti with dlopen, enabling the activity
// kinds, and parsing the completed activity buffers into CuptiRecords. cupti_activity.cpp implements it with CUDA,
// cupti_activity_nocuda.cpp without (never loadable). Not thread-safe across sessions: CuptiTracer guarantees that at
// most one session runs at a time.
#include <string>

#include "engine/cuda/cupti_tracer.hpp"

namespace wsb::cupti_activity {

/// "" when libcupti is loaded (loading once per process, on first call), else why not.
std::string load_error();
/// Registers the buffer callbacks (once per process) and enables MEMCPY and CONCURRENT_KERNEL. Records collected
/// earlier are discarded. Throws Error(Resource) naming the failing CUPTI call (kinds already enabled are disabled).
void begin();
/// Disables both kinds, forces a flush of every buffer and returns what was collected since begin(). Throws
/// Error(Io) naming the failing CUPTI call.
CuptiRecords end();

}  // namespace wsb::cupti_activity
