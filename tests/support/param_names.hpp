#pragma once
// Names of parameterized test instances: GoogleTest allows only letters, digits and '_' in them.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <tuple>

namespace wsb::test {

/// `text` with every character that is not an ASCII letter or digit replaced by '_'.
inline std::string param_name(std::string text) {
  for (char& c : text) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return text;
}

/// Name generator for a std::string parameter (a profile id): "llama-tiny-bf16" -> "llama_tiny_bf16".
struct StringParamName {
  std::string operator()(const ::testing::TestParamInfo<std::string>& info) const { return param_name(info.param); }
};

/// Name generator for a (profile id, mode) tuple parameter: "<profile>_<mode>".
struct PairParamName {
  template <class Param>
  std::string operator()(const ::testing::TestParamInfo<Param>& info) const {
    return param_name(std::get<0>(info.param) + "_" + std::get<1>(info.param));
  }
};

}  // namespace wsb::test
