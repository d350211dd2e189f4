#pragma once
/* XXH3-128 built for AVX-512 from xxHash's own header (xxhash.h with XXH_INLINE_ALL), in a C translation unit of
 * its own compiled with -mavx512f. Debian's libxxhash is built for baseline x86-64, whose XXH3 runs at about
 * 11 GB/s per core over 256 KiB pieces on a Zen 4 build host against 42 GB/s with AVX-512 (1e9 B/s), and a publication's checksum is computed on
 * every byte a prepare folds. C rather than C++: no inline function with external linkage can come out of this
 * unit compiled for AVX-512 and be picked by the linker for callers on other CPUs.
 * Call these only where cpu_has_avx512() (core/cpu_features.hpp; core/checksum.cpp decides). xxHash specifies every vector path to
 * give the scalar path's hash (tests/core/test_checksum.cpp checks it against the library). */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A new streaming state, reset; NULL when out of memory. */
void* wsb_xxh3_avx512_create(void);
void wsb_xxh3_avx512_free(void* state);
void wsb_xxh3_avx512_reset(void* state);
void wsb_xxh3_avx512_update(void* state, const void* bytes, size_t size);
/** The 128-bit hash of everything updated so far, in xxHash's canonical (big-endian) byte order. */
void wsb_xxh3_avx512_digest(const void* state, unsigned char out[16]);
/** The 128-bit hash of `bytes`, canonical byte order. */
void wsb_xxh3_avx512_oneshot(const void* bytes, size_t size, unsigned char out[16]);

#ifdef __cplusplus
}
#endif
