#include "core/xxh3_avx512.h"

// XXH_INLINE_ALL makes every xxHash function static to this unit (xxHash renames them with its own XXH_INLINE_
// prefix), so none can clash with the library's.
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef __AVX512F__
#error "core/xxh3_avx512.c must be compiled with -mavx512f"
#endif

void* wsb_xxh3_avx512_create(void) {
  XXH3_state_t* state = XXH3_createState();
  if (state != NULL) XXH3_128bits_reset(state);
  return state;
}

void wsb_xxh3_avx512_free(void* state) { XXH3_freeState((XXH3_state_t*)state); }

void wsb_xxh3_avx512_reset(void* state) { XXH3_128bits_reset((XXH3_state_t*)state); }

void wsb_xxh3_avx512_update(void* state, const void* bytes, size_t size) {
  XXH3_128bits_update((XXH3_state_t*)state, bytes, size);
}

void wsb_xxh3_avx512_digest(const void* state, unsigned char out[16]) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest((const XXH3_state_t*)state));
  for (int i = 0; i < 16; ++i) out[i] = canonical.digest[i];
}

void wsb_xxh3_avx512_oneshot(const void* bytes, size_t size, unsigned char out[16]) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes, size));
  for (int i = 0; i < 16; ++i) out[i] = canonical.digest[i];
}
