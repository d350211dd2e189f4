#include "core/checksum.hpp"

#include <xxhash.h>

#include <new>

namespace wsb {
namespace {

std::string canonical_hex(XXH128_hash_t hash) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[canonical.digest[i] >> 4];
    out[2 * i + 1] = kDigits[canonical.digest[i] & 0xF];
  }
  return out;
}

}  // namespace

std::string xxh3_128_hex(std::span<const uint8_t> bytes) {
  return canonical_hex(XXH3_128bits(bytes.data(), bytes.size()));
}

Xxh3Hasher::Xxh3Hasher() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Hasher::~Xxh3Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Hasher::update(std::span<const uint8_t> bytes) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
}

void Xxh3Hasher::reset() { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }

std::string Xxh3Hasher::hex() const { return canonical_hex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace wsb
