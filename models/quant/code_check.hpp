#pragma once
// Validation of stored codes: a payload whose bytes decode to NaN / infinity (or to an E8M0 NaN scale) is bad
// input even when its checksum matches, because the engine would serve NaN logits.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/tensor_spec.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb {

/// First invalid code of a tensor and how many there are.
struct InvalidCode {
  uint64_t element = 0;  ///< element index in the code format (packed E2M1 never has invalid codes)
  uint64_t code = 0;     ///< the stored code (little-endian value of the element's bytes)
  uint64_t count = 0;    ///< invalid codes in the whole tensor
};

/// Scans `bytes` (the tensor's little-endian canonical bytes) for codes that are invalid in the tensor's code
/// format (quant_role): IEEE NaN/infinity (all-ones exponent), E4M3 0x7F/0xFF, E5M2 all-ones exponent, E8M0
/// 0xFF. Packed E2M1 and CodeFormat::None have no invalid codes. nullopt when every code is valid.
/// Throughput is that of a 64-bit word scan (several GB/s per core). Throws Error(Mismatch) naming the tensor
/// when bytes.size() != spec.bytes().
std::optional<InvalidCode> find_invalid_code(const TensorSpec& spec, std::span<const uint8_t> bytes);

/// find_invalid_code, throwing Error(Format) when a code is invalid. The message starts with `context` (e.g.
/// "prepare 000003") and names the tensor, its dtype and shape, the code format, the first invalid element (flat
/// index and coordinates), its code and the number of invalid codes, e.g.
/// "prepare 000001: tensor 'model.layers.0.mlp.down_proj.weight' (F8_E4M3 [4, 8]): element 9 [1, 1] holds
/// E4M3 code 0x7F, which is NaN (1 invalid code in the tensor)".
/// Throws Error(Mismatch) when bytes.size() != spec.bytes().
void check_codes(const TensorSpec& spec, std::span<const uint8_t> bytes, std::string_view context);

/// Detection-only form of find_invalid_code for a tensor whose final bytes are produced front to back (a streamed
/// delta fold): each advance scans the newly final bytes while they are still in cache, so the check costs no
/// separate pass over memory. On found(), call check_codes on the whole tensor for the exact message.
class CodeScanner {
 public:
  explicit CodeScanner(const TensorSpec& spec);
  /// Scans tensor[scanned so far, upto). `tensor` is the whole tensor (spec.bytes() bytes); every byte before
  /// `upto` must be final. Calls must not decrease `upto`.
  void advance(std::span<const uint8_t> tensor, size_t upto);
  bool found() const { return found_; }

 private:
  bool active_ = false;
  bool and_word_ = false;
  uint64_t mask_ = 0, add_ = 0, top_ = 0;
  size_t cursor_ = 0;
  bool found_ = false;
};

}  // namespace wsb
