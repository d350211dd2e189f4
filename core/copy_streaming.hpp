#pragma once
// Copies whose destination is not read again soon (a rank image, a bucket, a receive buffer): stores that bypass
// the caches, so the destination lines are neither read before they are written nor evict what other threads
// work on.
#include <cstddef>

namespace wsb {

/// Bytes from which copy_streaming streams by default (256 KiB): a smaller copy is usually read again soon.
inline constexpr size_t kStreamingMinBytes = size_t{256} << 10;

/// memcpy(dst, src, bytes) whose stores are non-temporal (movntdq, then an sfence so they are visible before
/// whatever this thread signals next) when `bytes` >= `streaming_min`, on x86-64; plain memcpy otherwise. The
/// ranges must not overlap.
void copy_streaming(void* dst, const void* src, size_t bytes, size_t streaming_min = kStreamingMinBytes);

}  // namespace wsb
