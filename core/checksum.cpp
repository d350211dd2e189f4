#include "core/checksum.hpp"

#include <xxhash.h>

#include <new>

#include "core/cpu_features.hpp"

#ifdef WSBENCH_XXH3_AVX512
#include "core/xxh3_avx512.h"
#endif

namespace wsb {
namespace {

std::string hex_of(const unsigned char (&digest)[16]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[digest[i] >> 4];
    out[2 * i + 1] = kDigits[digest[i] & 0xF];
  }
  return out;
}

std::string canonical_hex(XXH128_hash_t hash) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  return hex_of(canonical.digest);
}

bool use_avx512() {
#ifdef WSBENCH_XXH3_AVX512
  return cpu_has_avx512();
#else
  return false;
#endif
}

}  // namespace

std::string xxh3_128_hex(std::span<const uint8_t> bytes) {
#ifdef WSBENCH_XXH3_AVX512
  if (use_avx512()) {
    unsigned char digest[16];
    wsb_xxh3_avx512_oneshot(bytes.data(), bytes.size(), digest);
    return hex_of(digest);
  }
#endif
  return canonical_hex(XXH3_128bits(bytes.data(), bytes.size()));
}

Xxh3Hasher::Xxh3Hasher() : avx512_(use_avx512()) {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512_) {
    state_ = wsb_xxh3_avx512_create();
    if (state_ == nullptr) throw std::bad_alloc();
    return;
  }
#endif
  state_ = XXH3_createState();
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Hasher::~Xxh3Hasher() {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512_) {
    wsb_xxh3_avx512_free(state_);
    return;
  }
#endif
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void Xxh3Hasher::update(std::span<const uint8_t> bytes) {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512_) {
    wsb_xxh3_avx512_update(state_, bytes.data(), bytes.size());
    return;
  }
#endif
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
}

void Xxh3Hasher::reset() {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512_) {
    wsb_xxh3_avx512_reset(state_);
    return;
  }
#endif
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

std::string Xxh3Hasher::hex() const {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512_) {
    unsigned char digest[16];
    wsb_xxh3_avx512_digest(state_, digest);
    return hex_of(digest);
  }
#endif
  return canonical_hex(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_)));
}

}  // namespace wsb
