#include "modes/refit/device_ipc.hpp"

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

int local_gpu_id(int rank, int physical, int base_gpu_id, int expected_local) {
  if (physical < base_gpu_id) {
    fail_rank(ErrorKind::Mismatch, rank,
              fmt::format("the sender's bucket ring is on physical GPU {}, below the engine's base_gpu_id {}", physical,
                          base_gpu_id));
  }
  const int local = physical - base_gpu_id;  // no overflow: 0 <= physical - base_gpu_id <= physical
  if (local != expected_local) {
    fail_rank(ErrorKind::Mismatch, rank,
              fmt::format("the sender's bucket ring is on physical GPU {} (local GPU {} with base_gpu_id {}), but "
                          "engine TP rank {} lives on local GPU {}",
                          physical, local, base_gpu_id, rank, expected_local));
  }
  return local;
}

void check_ring_range(std::string_view owner, std::string_view what, uint64_t offset, uint64_t bytes,
                      uint64_t size) {
  if (offset > size || bytes > size - offset) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("{}: {} of [{}, {}) outside the {} B ring", owner, what, offset, offset + bytes, size));
  }
}

}  // namespace wsb::refit
