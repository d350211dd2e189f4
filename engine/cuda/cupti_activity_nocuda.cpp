// Build of engine/cuda/cupti_activity.hpp without CUDA: CUPTI never loads.
#ifndef WSBENCH_HAVE_CUDA
#include "engine/cuda/cupti_activity.hpp"
#include "core/errors.hpp"

namespace wsb::cupti_activity {

std::string load_error() { return "built without CUDA"; }
void begin() { throw Error(ErrorKind::Resource, "CUPTI: built without CUDA"); }
CuptiRecords end() { return {}; }

}  // namespace wsb::cupti_activity
#endif
