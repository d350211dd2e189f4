#pragma once
// How the stored bytes of one canonical tensor are read as numbers, and what the tensor is inside a quantized
// linear layer. One rule on (dtype, name), shared by the publisher (synthesis, perturbation), code validation at
// prepare and anyone else who must tell packed FP4 from E8M0 scales in a U8 tensor.
//
// safetensors has no FP4 dtype that checkpoints use and MXFP4 checkpoints store E8M0 scales as U8, so the dtype
// alone is not enough (models-and-formats.md: Kimi-K2.6-NVFP4 weight U8 [N, K/2], gpt-oss *_blocks / *_scales U8).
// The rule, by name suffix (checked in this order):
//   - "input_scale"                      any float dtype     -> InputScale (activation calibration; immutable)
//   - "weight_scale_2"                   float dtype         -> GlobalScale, NVFP4 (F32 scalar)
//   - "weight_scale"                     F8_E4M3             -> BlockScale, NVFP4 (one per 16 elements)
//   - "weight_scale" / "weight_scale_inv" BF16/F16/F32       -> ChannelScale, FP8 ([out, 1] per channel, or the
//                                                              DeepSeek-style 128x128 block scale)
//   - "_scales"                          U8 or F8_E8M0       -> E8M0 BlockScale, MXFP4 (one per 32 elements)
//   - "_blocks"                          U8                  -> packed E2M1 Weight, MXFP4
//   - ".weight" / "weight"               U8                  -> packed E2M1 Weight, NVFP4
//   - ".weight" / "weight"               F8_E4M3             -> E4M3 Weight, FP8
//   - any other F8_E4M3 / F8_E8M0 / F8_E5M2                  -> that code, Plain
//   - any other BF16/F16/F32/F64                             -> IEEE, Plain (unquantized)
//   - everything else (integers, BOOL, other U8)             -> CodeFormat::None (opaque bytes)
#include <cstdint>
#include <string_view>

#include "core/tensor_spec.hpp"

namespace wsb {

/// Encoding of the tensor's stored codes.
enum class CodeFormat : uint8_t {
  None,    ///< integers, BOOL, unrecognised U8: no numeric rule
  Ieee,    ///< BF16 / F16 / F32 / F64: an all-ones exponent (NaN, infinity) is invalid
  E4M3,    ///< one E4M3 code per byte: 0x7F / 0xFF (NaN) invalid
  E5M2,    ///< one E5M2 code per byte (OFP8): an all-ones exponent (NaN, infinity) is invalid
  E2M1x2,  ///< two E2M1 codes per byte, low nibble = even element: every code valid
  E8M0,    ///< one E8M0 code per byte: 0xFF (NaN) invalid
};

/// What the tensor is inside a quantized linear layer.
enum class QuantPart : uint8_t {
  Plain,         ///< not part of a quantized weight (norms, embeddings, BF16 projections, biases, router)
  Weight,        ///< quantized weight codes
  BlockScale,    ///< per-block scale (NVFP4 E4M3 per 16, MXFP4 E8M0 per 32, block FP8 F32 per 128x128)
  ChannelScale,  ///< FP8 per-output-channel scale (F32 [out, 1])
  GlobalScale,   ///< NVFP4 per-tensor weight_scale_2 (F32 scalar)
  InputScale,    ///< static activation scale (F32 scalar): calibration data an update never changes
};

/// Quantization method the tensor belongs to.
enum class QuantMethod : uint8_t { None, Fp8, Nvfp4, Mxfp4 };

struct QuantRole {
  CodeFormat format = CodeFormat::None;
  QuantPart part = QuantPart::Plain;
  QuantMethod method = QuantMethod::None;
  bool operator==(const QuantRole&) const = default;
};

/// The role of `spec` by the rule in this header's comment. Never throws.
QuantRole quant_role(const TensorSpec& spec);

/// Elements of `spec` in its code format: numel, or 2 * numel for packed E2M1 (two codes per U8).
uint64_t code_count(const TensorSpec& spec, const QuantRole& role);

/// "None", "IEEE", "E4M3", "E5M2", "E2M1x2", "E8M0" (for messages).
std::string_view code_format_name(CodeFormat format);

}  // namespace wsb
