#include "core/cpu_features.hpp"

namespace wsb {

bool cpu_has_avx512() {
#ifdef WSBENCH_AVX512_DISPATCH
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
#else
  return false;
#endif
}

}  // namespace wsb
