#include "engine/generation.hpp"

#include <bit>
#include <cstring>

#include "core/checksum.hpp"

namespace wsb {
namespace {

void append_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void append_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::string fingerprint(const std::vector<int32_t>& output_ids, const std::string& text,
                        const std::vector<float>& logprobs) {
  std::vector<uint8_t> bytes;
  append_u64(bytes, output_ids.size());
  for (int32_t id : output_ids) append_u32(bytes, static_cast<uint32_t>(id));
  append_u64(bytes, text.size());
  bytes.insert(bytes.end(), text.begin(), text.end());
  append_u64(bytes, logprobs.size());
  for (float lp : logprobs) append_u32(bytes, std::bit_cast<uint32_t>(lp));
  return xxh3_128_hex(bytes);
}

}  // namespace wsb
