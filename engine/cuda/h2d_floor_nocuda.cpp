// Build of measure_h2d_floors without CUDA: there is no device to measure.
#ifndef WSBENCH_HAVE_CUDA
#include "engine/cuda/h2d_floor.hpp"

namespace wsb {

std::vector<H2dFloor> measure_h2d_floors(const std::vector<uint64_t>&, uint64_t, int, int) { return {}; }

}  // namespace wsb
#endif
