#include "models/quant/quant_role.hpp"

namespace wsb {
namespace {

bool is_ieee(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32 || dtype == DType::F64;
}

/// "x.weight" or a bare "weight", so "gate_up_proj_weight"-like names of other conventions never match.
bool is_weight_name(std::string_view name) { return name == "weight" || name.ends_with(".weight"); }

}  // namespace

QuantRole quant_role(const TensorSpec& spec) {
  const std::string_view name = spec.name;
  const DType dtype = spec.dtype;
  if (name.ends_with("input_scale") && is_ieee(dtype)) {
    return {CodeFormat::Ieee, QuantPart::InputScale, QuantMethod::None};
  }
  if (name.ends_with("weight_scale_2") && is_ieee(dtype)) {
    return {CodeFormat::Ieee, QuantPart::GlobalScale, QuantMethod::Nvfp4};
  }
  if (name.ends_with("weight_scale") && dtype == DType::F8_E4M3) {
    return {CodeFormat::E4M3, QuantPart::BlockScale, QuantMethod::Nvfp4};
  }
  if (name.ends_with("weight_scale") && is_ieee(dtype)) {
    return {CodeFormat::Ieee, QuantPart::ChannelScale, QuantMethod::Fp8};
  }
  if (name.ends_with("weight_scale_inv") && is_ieee(dtype)) {
    return {CodeFormat::Ieee, QuantPart::BlockScale, QuantMethod::Fp8};
  }
  if (name.ends_with("_scales") && (dtype == DType::U8 || dtype == DType::F8_E8M0)) {
    return {CodeFormat::E8M0, QuantPart::BlockScale, QuantMethod::Mxfp4};
  }
  if (name.ends_with("_blocks") && dtype == DType::U8) {
    return {CodeFormat::E2M1x2, QuantPart::Weight, QuantMethod::Mxfp4};
  }
  if (is_weight_name(name) && dtype == DType::U8) return {CodeFormat::E2M1x2, QuantPart::Weight, QuantMethod::Nvfp4};
  if (is_weight_name(name) && dtype == DType::F8_E4M3) return {CodeFormat::E4M3, QuantPart::Weight, QuantMethod::Fp8};
  switch (dtype) {
    case DType::F8_E4M3:
      return {CodeFormat::E4M3, QuantPart::Plain, QuantMethod::None};
    case DType::F8_E5M2:
      return {CodeFormat::E5M2, QuantPart::Plain, QuantMethod::None};
    case DType::F8_E8M0:
      return {CodeFormat::E8M0, QuantPart::Plain, QuantMethod::None};
    default:
      break;
  }
  if (is_ieee(dtype)) return {CodeFormat::Ieee, QuantPart::Plain, QuantMethod::None};
  return {};
}

uint64_t code_count(const TensorSpec& spec, const QuantRole& role) {
  return role.format == CodeFormat::E2M1x2 ? 2 * spec.numel() : spec.numel();
}

std::string_view code_format_name(CodeFormat format) {
  switch (format) {
    case CodeFormat::None:
      return "None";
    case CodeFormat::Ieee:
      return "IEEE";
    case CodeFormat::E4M3:
      return "E4M3";
    case CodeFormat::E5M2:
      return "E5M2";
    case CodeFormat::E2M1x2:
      return "E2M1x2";
    case CodeFormat::E8M0:
      return "E8M0";
  }
  return "?";
}

}  // namespace wsb
