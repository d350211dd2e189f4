#include "core/cpu_features.hpp"

#include <atomic>

namespace wsb {
namespace {

std::atomic<bool> g_allowed{true};

}  // namespace

bool cpu_has_avx512() {
#ifdef WSBENCH_AVX512_DISPATCH
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes && g_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void set_avx512_allowed(bool allowed) { g_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace wsb
