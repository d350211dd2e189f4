// Build-independent part of engine/cuda/h2d_floor.hpp.
#include "engine/cuda/h2d_floor.hpp"

namespace wsb {

std::vector<uint64_t> default_h2d_chunk_sizes() { return {16ull << 20, 64ull << 20, 256ull << 20, 1024ull << 20}; }

}  // namespace wsb
