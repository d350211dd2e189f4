#pragma once
// xxh3-128 content hashes, the default `checksum_format` of publications (xxHash XXH3 128-bit).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace wsb {

/// Hex (32 lowercase chars) of XXH3-128 over `bytes`, in xxHash's canonical (big-endian) byte order. Where
/// cpu_has_avx512() (core/cpu_features.hpp) the hash is computed by xxHash's AVX-512 path (core/xxh3_avx512.h): the same value, about 4x faster.
std::string xxh3_128_hex(std::span<const uint8_t> bytes);

/// Streaming form of xxh3_128_hex for data fed in pieces (e.g. a storage read in chunks); the same AVX-512 choice.
class Xxh3Hasher {
 public:
  Xxh3Hasher();
  ~Xxh3Hasher();
  Xxh3Hasher(const Xxh3Hasher&) = delete;
  Xxh3Hasher& operator=(const Xxh3Hasher&) = delete;
  void update(std::span<const uint8_t> bytes);
  std::string hex() const;
  /// Starts over, as freshly constructed (the state is reused: no allocation).
  void reset();

 private:
  void* state_ = nullptr;
  bool avx512_ = false;  ///< state_ is core/xxh3_avx512.h's
};

}  // namespace wsb
