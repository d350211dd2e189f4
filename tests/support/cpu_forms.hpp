#pragma once
// Runs a suite once with the AVX-512 forms of the dispatched loops and once with their portable forms
// (core/cpu_features.hpp), so a CPU with AVX-512 tests both. On a CPU without it both runs take the portable form.
#include <gtest/gtest.h>

#include <string>

#include "core/cpu_features.hpp"

namespace wsb::test {

/// Fixture parameter: true = the CPU's answer (AVX-512 where it has it), false = the portable forms.
class CpuForms : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { set_avx512_allowed(GetParam()); }
  void TearDown() override { set_avx512_allowed(true); }
};

inline std::string cpu_form_name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "avx512" : "portable";
}

}  // namespace wsb::test

/// Declares fixture SUITE over both forms; use TEST_P(SUITE, Name) for its tests.
#define WSBENCH_BOTH_CPU_FORMS(SUITE)                 \
  class SUITE : public ::wsb::test::CpuForms {};      \
  INSTANTIATE_TEST_SUITE_P(Forms, SUITE, ::testing::Values(true, false), ::wsb::test::cpu_form_name)
