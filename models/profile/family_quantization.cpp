#include "models/profile/family_quantization.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

// Unquantized MoE experts run as stacked dense [E, rows, cols] linears (SGLang's UnquantizedFusedMoEMethod w13 /
// w2); gpt_oss's BF16 experts are K-major [E, in, out] storages (moe_layout.hpp).
constexpr std::string_view kLlama[] = {kQuantNone};
constexpr std::string_view kGlm4Moe[] = {kQuantFp8Channel, kQuantNone};
constexpr std::string_view kDeepseekV3[] = {kQuantNvfp4, kQuantNone};
constexpr std::string_view kGptOss[] = {kQuantMxfp4, kQuantNone};

}  // namespace

std::span<const std::string_view> family_quantizations(std::string_view family) {
  if (family == kLlamaFamily) return kLlama;
  if (family == kGlm4MoeFamily) return kGlm4Moe;
  if (family == kDeepseekV3Family) return kDeepseekV3;
  if (family == kGptOssFamily) return kGptOss;
  return {};
}

bool family_supports_quantization(std::string_view family, std::string_view quantization) {
  const auto methods = family_quantizations(family);
  return std::find(methods.begin(), methods.end(), quantization) != methods.end();
}

std::string family_quantization_list(std::string_view family) {
  const auto methods = family_quantizations(family);
  if (methods.empty()) return "none known";
  return fmt::format("{}", fmt::join(methods, ", "));
}

}  // namespace wsb
