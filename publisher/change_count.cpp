// Changed-element counts of a publication: what share of the model one version moved, per class of codes.
#include <cstring>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/quant/quant_role.hpp"
#include "publisher/publisher.hpp"

namespace wsb {
namespace {

/// Elements of `width` bytes that differ. Word loads by memcpy keep the loop free of alignment assumptions and let
/// the compiler vectorize it.
template <typename Word>
uint64_t count_words(const uint8_t* a, const uint8_t* b, uint64_t n) {
  uint64_t changed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    Word x, y;
    std::memcpy(&x, a + i * sizeof(Word), sizeof(Word));
    std::memcpy(&y, b + i * sizeof(Word), sizeof(Word));
    changed += x != y;
  }
  return changed;
}

}  // namespace

double PublicationStats::density() const {
  uint64_t elements = 0;
  for (const auto& [key, count] : changes) elements += count.elements;
  return elements == 0 ? 0.0 : static_cast<double>(changed_values) / static_cast<double>(elements);
}

double PublicationStats::compression_ratio() const {
  return stored_bytes == 0 ? 0.0 : static_cast<double>(canonical_bytes) / static_cast<double>(stored_bytes);
}

std::string change_class(const TensorSpec& tensor) {
  if (quant_role(tensor).format == CodeFormat::E2M1x2) return "E2M1";
  return std::string(dtype_name(tensor.dtype));
}

uint64_t change_elements(const TensorSpec& tensor) { return code_count(tensor, quant_role(tensor)); }

uint64_t count_changed(const TensorSpec& tensor, std::span<const uint8_t> base, std::span<const uint8_t> target) {
  if (base.size() != tensor.bytes() || target.size() != tensor.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' ({} {}): {} and {} bytes compared, expected {}",
                                                 tensor.name, dtype_name(tensor.dtype), shape_string(tensor.shape),
                                                 base.size(), target.size(), tensor.bytes()));
  }
  const uint8_t* a = base.data();
  const uint8_t* b = target.data();
  if (quant_role(tensor).format == CodeFormat::E2M1x2) {
    uint64_t changed = 0;
    for (uint64_t i = 0; i < base.size(); ++i) {
      const uint8_t d = a[i] ^ b[i];
      changed += ((d & 0x0F) != 0) + ((d & 0xF0) != 0);
    }
    return changed;
  }
  const uint64_t n = tensor.numel();
  switch (dtype_size(tensor.dtype)) {
    case 1: return count_words<uint8_t>(a, b, n);
    case 2: return count_words<uint16_t>(a, b, n);
    case 4: return count_words<uint32_t>(a, b, n);
    case 8: return count_words<uint64_t>(a, b, n);
    default: break;
  }
  const size_t width = dtype_size(tensor.dtype);
  uint64_t changed = 0;
  for (uint64_t i = 0; i < n; ++i) changed += std::memcmp(a + i * width, b + i * width, width) != 0;
  return changed;
}

}  // namespace wsb
