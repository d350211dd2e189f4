#include "core/checksum.hpp"

#include <xxhash.h>

#include <cstring>
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

/// One implementation of XXH3-128, as the C functions of core/xxh3_avx512.h: chosen once per hasher (a state is
/// only ever handled by the functions that made it).
struct Xxh3Ops {
  void* (*create)();
  void (*free)(void*);
  void (*reset)(void*);
  void (*update)(void*, const void*, size_t);
  void (*digest)(const void*, unsigned char*);
  void (*oneshot)(const void*, size_t, unsigned char*);
};

void canonical_bytes(XXH128_hash_t hash, unsigned char* out) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  std::memcpy(out, canonical.digest, 16);
}

/// Debian's libxxhash (baseline x86-64).
constexpr Xxh3Ops kLibrary{
    [] () -> void* {
      XXH3_state_t* state = XXH3_createState();
      if (state != nullptr) XXH3_128bits_reset(state);
      return state;
    },
    [](void* state) { XXH3_freeState(static_cast<XXH3_state_t*>(state)); },
    [](void* state) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state)); },
    [](void* state, const void* bytes, size_t size) {
      XXH3_128bits_update(static_cast<XXH3_state_t*>(state), bytes, size);
    },
    [](const void* state, unsigned char* out) {
      canonical_bytes(XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state)), out);
    },
    [](const void* bytes, size_t size, unsigned char* out) { canonical_bytes(XXH3_128bits(bytes, size), out); },
};

#ifdef WSBENCH_XXH3_AVX512
constexpr Xxh3Ops kAvx512{wsb_xxh3_avx512_create, wsb_xxh3_avx512_free,   wsb_xxh3_avx512_reset,
                          wsb_xxh3_avx512_update, wsb_xxh3_avx512_digest, wsb_xxh3_avx512_oneshot};
#endif

const Xxh3Ops& ops(bool avx512) {
#ifdef WSBENCH_XXH3_AVX512
  if (avx512) return kAvx512;
#else
  (void)avx512;
#endif
  return kLibrary;
}

}  // namespace

std::string xxh3_128_hex(std::span<const uint8_t> bytes) {
  unsigned char digest[16];
  ops(cpu_has_avx512()).oneshot(bytes.data(), bytes.size(), digest);
  return hex_of(digest);
}

Xxh3Hasher::Xxh3Hasher() : avx512_(cpu_has_avx512()) {
  state_ = ops(avx512_).create();
  if (state_ == nullptr) throw std::bad_alloc();
}

Xxh3Hasher::~Xxh3Hasher() { ops(avx512_).free(state_); }

void Xxh3Hasher::update(std::span<const uint8_t> bytes) { ops(avx512_).update(state_, bytes.data(), bytes.size()); }

void Xxh3Hasher::reset() { ops(avx512_).reset(state_); }

std::string Xxh3Hasher::hex() const {
  unsigned char digest[16];
  ops(avx512_).digest(state_, digest);
  return hex_of(digest);
}

}  // namespace wsb
