#pragma once
// Names of parameterized test instances: GoogleTest allows only letters, digits and '_' in them.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <tuple>
#include <vector>

namespace wsb::test {

/// Every tiny CI preset (models/profiles/*-tiny-*.json), the usual parameter list of a suite run over all of
/// them: one per family and quantization.
inline std::vector<std::string> tiny_presets() {
  return {"llama-tiny-bf16", "glm-tiny-fp8",       "glm-tiny-bf16",    "kimi-tiny-nvfp4",
          "kimi-tiny-bf16",  "gpt-oss-tiny-mxfp4", "gpt-oss-tiny-bf16"};
}

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
